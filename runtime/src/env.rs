//! The final environment guard every job passes through, whatever the backend.
//!
//! A job's environment is an explicit list: nothing is inherited from the process running
//! wrun. On top of whatever allowlist the host applied, this guard
//!
//! - drops every name that looks like a credential (suffixes `_API_KEY`, `_SECRET`, `_TOKEN`,
//!   `_PASSWORD` and kin, and the cloud and CI credential names of seed 004), even when the
//!   policy itself set it: a helper reads pull-request code and must never hold a secret;
//! - drops names that change how programs load code (`LD_PRELOAD`, `PYTHONPATH`,
//!   `NODE_OPTIONS`, `BASH_ENV`, `PATH`, ...) unless the job marks the variable as set by
//!   policy ([`EnvOrigin::Policy`]);
//! - drops malformed entries (empty name, `=` or NUL in the name, NUL in the value).
//!
//! Every drop is reported by name with its reason; values of dropped variables are never
//! reported. The guard does not decide which variables a helper should get: that is the
//! host's allowlist.

use serde::{Deserialize, Serialize};

/// Who asked for an environment variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EnvOrigin {
    /// The request or the helper definition: may not set loader or interpreter variables.
    Job,
    /// The operator's policy: may set loader and interpreter variables (never secrets).
    Policy,
}

/// One environment variable of a job.
#[derive(Clone, PartialEq, Eq)]
pub struct EnvVar {
    /// The name.
    pub name: String,
    /// The value.
    pub value: String,
    /// Who set it.
    pub origin: EnvOrigin,
}

impl std::fmt::Debug for EnvVar {
    // Values may be anything the host passed; keep them out of logs and panics.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvVar")
            .field("name", &self.name)
            .field("value", &"<hidden>")
            .field("origin", &self.origin)
            .finish()
    }
}

/// Why the guard dropped a variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DropReason {
    /// The name is a credential name; no origin may pass it.
    Secret,
    /// The name changes how code is loaded or run; only the policy may set it.
    PolicyOnly,
    /// The name or value cannot be an environment entry.
    Malformed,
    /// A later entry with the same name replaced this one.
    Duplicate,
}

impl std::fmt::Display for DropReason {
    /// Why, for a person.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DropReason::Secret => "a credential: never passed to a helper",
            DropReason::PolicyOnly => "it changes how code is loaded: only the operator's policy may set it",
            DropReason::Malformed => "not a valid environment entry",
            DropReason::Duplicate => "set again later",
        })
    }
}

/// A variable the guard dropped: its name and why, never its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DroppedEnv {
    /// The name as given.
    pub name: String,
    /// Why it was dropped.
    pub reason: DropReason,
}

/// Credential suffixes (seed 003 layer 4, extended with the key and credential spellings that
/// cloud SDKs use). Matched case-insensitively against the whole name.
const SECRET_SUFFIXES: &[&str] = &[
    "_API_KEY",
    "_APIKEY",
    "_SECRET",
    "_SECRET_KEY",
    "_ACCESS_KEY",
    "_PRIVATE_KEY",
    "_TOKEN",
    "_PASSWORD",
    "_PASSWD",
    "_CREDENTIALS",
    "_AUTH",
];

/// Credential names that do not end in a credential suffix (seed 004's scrub list: the model
/// provider, AWS, GCP, Azure, GitHub Actions and OpenTelemetry header variables).
const SECRET_NAMES: &[&str] = &[
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_OAUTH_ACCESS_TOKEN",
    "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE",
    "AZURE_CLIENT_SECRET",
    "AZURE_CLIENT_CERTIFICATE_PATH",
    "AZURE_CLIENT_CERTIFICATE_PASSWORD",
    "AZURE_FEDERATED_TOKEN_FILE",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_URL",
    "ACTIONS_RUNTIME_TOKEN",
    "ACTIONS_RUNTIME_URL",
    "ACTIONS_CACHE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
    "OTEL_EXPORTER_OTLP_LOGS_HEADERS",
    "SSH_AUTH_SOCK",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "NETRC",
    "DOCKER_AUTH_CONFIG",
    "KUBECONFIG",
    "VAULT_ADDR",
];

/// Names that change which code runs: dynamic loader, interpreter search paths and startup
/// hooks, shell start-up files, compiler flags, and the variables a sandbox sets itself
/// (seed 004, "variables never safe"). Only the policy may set them.
const POLICY_ONLY_NAMES: &[&str] = &[
    "PATH",
    "HOME",
    "TMPDIR",
    "SHELL",
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
    "SHELLOPTS",
    "BASHOPTS",
    "IFS",
    "CDPATH",
    "GLOBIGNORE",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONUSERBASE",
    "PYTHONINSPECT",
    "NODE_OPTIONS",
    "NODE_PATH",
    "CLASSPATH",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "RUBYLIB",
    "RUBYOPT",
    "PERL5LIB",
    "PERL5OPT",
    "PERLLIB",
    "GOFLAGS",
    "RUSTFLAGS",
    "RUSTC_WRAPPER",
    "CARGO_HOME",
    "GCONV_PATH",
    "HOSTALIASES",
    "LOCPATH",
    "NLSPATH",
    "MALLOC_CONF",
    "GIT_EXEC_PATH",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_EXTERNAL_DIFF",
    "GIT_PAGER",
    "GIT_EDITOR",
    "EDITOR",
    "VISUAL",
    "PAGER",
];

/// Prefixes with the same effect as [`POLICY_ONLY_NAMES`].
const POLICY_ONLY_PREFIXES: &[&str] = &["LD_", "DYLD_", "GIT_CONFIG", "BASH_FUNC_", "PYTHONWARN"];

/// Whether `name` is a credential name that no origin may pass (case-insensitive).
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    let bare = upper.strip_prefix("INPUT_").unwrap_or(&upper);
    SECRET_NAMES.contains(&bare)
        || SECRET_SUFFIXES.iter().any(|s| bare.ends_with(s))
        || bare == "TOKEN"
        || bare == "PASSWORD"
        || bare == "SECRET"
        || bare == "API_KEY"
}

/// Whether `name` may only be set by the policy (case-insensitive).
pub fn is_policy_only_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    POLICY_ONLY_NAMES.contains(&upper.as_str()) || POLICY_ONLY_PREFIXES.iter().any(|p| upper.starts_with(p))
}

/// The result of [`guard`]: what passes, in order, and what was dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuardedEnv {
    /// Name and value of each variable that passes. Names are unique.
    pub vars: Vec<(String, String)>,
    /// What was dropped, by name.
    pub dropped: Vec<DroppedEnv>,
}

/// Applies the guard to a job's environment. A later entry with the same name wins; the earlier
/// one is reported as a duplicate.
pub fn guard(vars: &[EnvVar]) -> GuardedEnv {
    let mut out = GuardedEnv::default();
    for var in vars {
        let reason = if var.name.is_empty() || var.name.contains(['=', '\0']) || var.value.contains('\0') {
            Some(DropReason::Malformed)
        } else if is_secret_name(&var.name) {
            Some(DropReason::Secret)
        } else if var.origin == EnvOrigin::Job && is_policy_only_name(&var.name) {
            Some(DropReason::PolicyOnly)
        } else {
            None
        };
        if let Some(reason) = reason {
            out.dropped.push(DroppedEnv {
                name: var.name.clone(),
                reason,
            });
            continue;
        }
        if let Some(pos) = out.vars.iter().position(|(n, _)| *n == var.name) {
            let (name, _) = out.vars.remove(pos);
            out.dropped.push(DroppedEnv {
                name,
                reason: DropReason::Duplicate,
            });
        }
        out.vars.push((var.name.clone(), var.value.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn var(name: &str, origin: EnvOrigin) -> EnvVar {
        EnvVar {
            name: name.into(),
            value: "v".into(),
            origin,
        }
    }

    #[test]
    fn secrets_are_dropped_whoever_sets_them() {
        for name in [
            "OPENAI_API_KEY",
            "github_token",
            "DB_PASSWORD",
            "APP_SECRET",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_ACCESS_KEY_ID",
            "ACTIONS_ID_TOKEN_REQUEST_URL",
            "INPUT_ANTHROPIC_API_KEY",
            "OTEL_EXPORTER_OTLP_HEADERS",
            "TOKEN",
        ] {
            for origin in [EnvOrigin::Job, EnvOrigin::Policy] {
                let g = guard(&[var(name, origin)]);
                assert!(g.vars.is_empty(), "{name} passed");
                assert_eq!(g.dropped[0].reason, DropReason::Secret);
            }
        }
    }

    #[test]
    fn loader_variables_need_the_policy() {
        for name in [
            "LD_PRELOAD",
            "ld_library_path",
            "PYTHONPATH",
            "NODE_OPTIONS",
            "BASH_ENV",
            "PATH",
            "DYLD_INSERT_LIBRARIES",
            "GIT_CONFIG_COUNT",
        ] {
            let g = guard(&[var(name, EnvOrigin::Job)]);
            assert!(g.vars.is_empty(), "{name} passed from a job");
            assert_eq!(g.dropped[0].reason, DropReason::PolicyOnly);
            let g = guard(&[var(name, EnvOrigin::Policy)]);
            assert_eq!(g.vars.len(), 1, "{name} refused from the policy");
        }
    }

    #[test]
    fn ordinary_variables_pass_and_malformed_ones_do_not() {
        let g = guard(&[
            var("LANG", EnvOrigin::Job),
            var("A=B", EnvOrigin::Job),
            var("", EnvOrigin::Job),
            EnvVar {
                name: "X".into(),
                value: "a\0b".into(),
                origin: EnvOrigin::Job,
            },
            var("RUST_LOG", EnvOrigin::Job),
        ]);
        assert_eq!(
            g.vars,
            vec![("LANG".into(), "v".into()), ("RUST_LOG".into(), "v".into())]
        );
        assert_eq!(g.dropped.len(), 3);
        assert!(g.dropped.iter().all(|d| d.reason == DropReason::Malformed));
    }

    #[test]
    fn last_duplicate_wins() {
        let mut second = var("LANG", EnvOrigin::Job);
        second.value = "w".into();
        let g = guard(&[var("LANG", EnvOrigin::Job), second]);
        assert_eq!(g.vars, vec![("LANG".into(), "w".into())]);
        assert_eq!(g.dropped[0].reason, DropReason::Duplicate);
    }

    #[test]
    fn debug_hides_values() {
        let v = EnvVar {
            name: "X".into(),
            value: "hunter2".into(),
            origin: EnvOrigin::Job,
        };
        assert!(!format!("{v:?}").contains("hunter2"));
    }
}
