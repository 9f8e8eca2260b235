//! Accounts and API tokens added while a server runs, as a store keeps them.

use crate::time::Timestamp;
use serde::{Deserialize, Serialize};

/// Which kind of credential.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum CredentialKind {
    /// A person's account: a name and a password.
    Account,
    /// An API token for scripts and the command line.
    Token,
}

impl CredentialKind {
    /// The stored name (`account`, `token`).
    pub fn as_str(self) -> &'static str {
        match self {
            CredentialKind::Account => "account",
            CredentialKind::Token => "token",
        }
    }

    /// The kind a stored name stands for.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "account" => Some(CredentialKind::Account),
            "token" => Some(CredentialKind::Token),
            _ => None,
        }
    }
}

/// An account (with its password's argon2 hash) or an API token (with its SHA-256),
/// the role it has and the executor groups it is limited to. A store keeps it as
/// given and checks none of it: the server that adds one validates every field.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credential {
    /// Account or token.
    pub kind: CredentialKind,
    /// Unique per kind in a store.
    pub name: String,
    /// An account's password as an argon2 PHC string, or a token's SHA-256 in hex.
    pub secret_hash: String,
    /// `viewer`, `operator` or `admin`.
    pub role: String,
    /// When set, the only executor groups whose jobs it sees and acts on.
    pub groups: Option<Vec<String>>,
}

/// A [`Credential`] as the store keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialRecord {
    /// The credential.
    #[serde(flatten)]
    pub credential: Credential,
    /// When it was added (store clock).
    pub created_at: Timestamp,
}
