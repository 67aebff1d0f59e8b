//! wrun's host layer: everything that turns an operator's policy, the upstream repository's
//! helper definitions and a request into a [`wrun_runtime::Job`], and the `wrun` command.
//!
//! This crate is the only place that reads wrun's own environment ([`ambient`]).
#![forbid(unsafe_code)]

pub mod ambient;
pub mod args;
pub mod audit;
pub mod check;
pub mod definitions;
pub mod exit;
pub mod expand;
pub mod findings;
pub mod git;
pub mod helper;
pub mod install;
pub mod parse;
pub mod policy;
pub mod resolve;
pub mod shell;
pub mod untrusted;
