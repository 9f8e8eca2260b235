//! Accounts and API tokens added and removed while the server runs (beside the
//! configuration file's): validated, hashed, stored in the store's
//! [`Credentials`](crate::store::Credentials) with their audit entry in the same step.
//! The admin API and the command line both call these functions.
//!
//! Rules:
//! * names follow the configuration's (1-64 of `[A-Za-z0-9._@-]`) and may not be
//!   one the configuration file holds (an account and a token may share a name);
//! * a password has 12 to 1,024 characters and is kept as an argon2id hash; a token
//!   is generated here (`jw_` and 64 hex digits), shown once, kept as its SHA-256;
//! * an actor limited to executor groups adds only credentials limited to some of
//!   its groups, and removes only those;
//! * the audit entry names the credential, its role and groups, never a hash.

use crate::admin::auth::{hash_password, new_token};
use crate::admin::config::check_name;
use crate::admin::{Role, ServerConfig};
use crate::error::{Error, Result};
use crate::ops::Actor;
use crate::record::AuditAction;
use crate::record::{AuditEntry, Credential, CredentialKind, CredentialRecord};
use crate::store::JobStore;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};

/// Shortest password an account added at runtime may have.
pub(crate) const MIN_PASSWORD_CHARS: usize = 12;
/// Longest.
pub(crate) const MAX_PASSWORD_CHARS: usize = 1_024;

/// An account to add.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewAccount {
    /// Its login name.
    pub name: String,
    /// Its password (12-1,024 characters); only its argon2id hash is kept.
    pub password: String,
    /// What it may do.
    pub role: Role,
    /// When set, the only executor groups whose jobs it sees and acts on.
    #[serde(default)]
    pub groups: Option<Vec<String>>,
}

/// A token to add: the server generates the token.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewToken {
    /// Its name (`token:<name>` in the audit log).
    pub name: String,
    /// What it may do.
    pub role: Role,
    /// When set, the only executor groups whose jobs it sees and acts on.
    #[serde(default)]
    pub groups: Option<Vec<String>>,
}

/// Where an account or token comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Source {
    /// The configuration file: changed by editing it and restarting.
    Configuration,
    /// Added at runtime: kept in the store, removed through the API or the command line.
    Store,
}

/// An account or token as the API and the command line show it (never its hash).
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct AccessView {
    /// Account or token.
    pub kind: CredentialKind,
    /// Its name.
    pub name: String,
    /// What it may do.
    pub role: Role,
    /// The only executor groups it acts on; `null`: every job.
    pub groups: Option<Vec<String>>,
    /// Where it comes from.
    pub source: Source,
    /// When it was added (store clock); `null` for the configuration's.
    pub created_at: Option<Timestamp>,
}

/// A token just added, with the token itself (shown this once).
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct AddedToken {
    /// The token as listed.
    #[serde(flatten)]
    pub view: AccessView,
    /// The token, for `Authorization: Bearer`: it is not kept and cannot be shown again.
    pub token: String,
}

fn view(r: &CredentialRecord) -> Option<AccessView> {
    let c = &r.credential;
    Some(AccessView {
        kind: c.kind,
        name: c.name.clone(),
        role: Role::from_stored(&c.role)?,
        groups: c.groups.clone(),
        source: Source::Store,
        created_at: Some(r.created_at),
    })
}

/// Every account and token `actor` may see: the configuration's, then the store's,
/// by kind and name. An actor limited to groups sees those limited to some of its
/// groups.
pub(crate) async fn list(
    store: &dyn JobStore,
    config: &ServerConfig,
    actor: &Actor,
) -> Result<Vec<AccessView>> {
    let configured = config
        .users
        .iter()
        .map(|u| (CredentialKind::Account, &u.name, u.role, &u.groups))
        .chain(
            config
                .tokens
                .iter()
                .map(|t| (CredentialKind::Token, &t.name, t.role, &t.groups)),
        )
        .map(|(kind, name, role, groups)| AccessView {
            kind,
            name: name.clone(),
            role,
            groups: groups.clone(),
            source: Source::Configuration,
            created_at: None,
        });
    let stored: Vec<AccessView> = store.credentials().await?.iter().filter_map(view).collect();
    let mut all: Vec<AccessView> = configured
        .chain(stored)
        .filter(|v| within(actor, &v.groups))
        .collect();
    all.sort_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
    Ok(all)
}

/// Whether a credential limited to `groups` is within what `actor` may manage.
fn within(actor: &Actor, groups: &Option<Vec<String>>) -> bool {
    match (actor.groups(), groups) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(mine), Some(theirs)) => theirs.iter().all(|g| mine.contains(g)),
    }
}

/// Checks a new credential's name, groups and limits. Errors: [`Error::Invalid`]
/// naming `name` or `groups`; [`Error::Conflict`] for a configured name;
/// [`Error::Forbidden`] for groups beyond the actor's.
fn check(
    config: &ServerConfig,
    actor: &Actor,
    kind: CredentialKind,
    name: &str,
    groups: &Option<Vec<String>>,
) -> Result<()> {
    check_name("name", name)?;
    for g in groups.iter().flatten() {
        check_name("groups", g)?;
    }
    if groups.as_ref().is_some_and(Vec::is_empty) {
        return Err(Error::invalid(
            "groups",
            "[]",
            "list at least one group, or leave it out",
        ));
    }
    let configured = match kind {
        CredentialKind::Account => config.users.iter().any(|u| u.name == name),
        CredentialKind::Token => config.tokens.iter().any(|t| t.name == name),
    };
    if configured {
        return Err(Error::Conflict {
            what: kind.as_str(),
            id: name.to_string(),
            reason: "the configuration file holds it".into(),
        });
    }
    if !within(actor, groups) {
        return Err(Error::Forbidden {
            reason: "an account limited to groups adds only accounts and tokens limited to some of its groups".into(),
        });
    }
    Ok(())
}

fn entry(actor: &Actor, action: AuditAction, v: &AccessView) -> AuditEntry {
    let shown =
        serde_json::json!({"kind": v.kind, "name": v.name, "role": v.role, "groups": v.groups});
    let (before, after) = if action.removes() {
        (Some(shown), None)
    } else {
        (None, Some(shown))
    };
    AuditEntry::new(actor.name(), action, v.name.clone(), before, after)
}

async fn add(
    store: &dyn JobStore,
    actor: &Actor,
    credential: Credential,
    role: Role,
) -> Result<AccessView> {
    let mut v = AccessView {
        kind: credential.kind,
        name: credential.name.clone(),
        role,
        groups: credential.groups.clone(),
        source: Source::Store,
        created_at: None,
    };
    let action = match credential.kind {
        CredentialKind::Account => AuditAction::AccountAdd,
        CredentialKind::Token => AuditAction::TokenAdd,
    };
    if !store
        .add_credential(&credential, &entry(actor, action, &v))
        .await?
    {
        return Err(Error::Conflict {
            what: credential.kind.as_str(),
            id: credential.name,
            reason: "one of this name exists".into(),
        });
    }
    v.created_at = store
        .credentials()
        .await?
        .iter()
        .find(|r| r.credential.kind == v.kind && r.credential.name == v.name)
        .map(|r| r.created_at);
    Ok(v)
}

/// Adds an account: its password hashed with argon2id (on a blocking thread).
pub(crate) async fn add_account(
    store: &dyn JobStore,
    config: &ServerConfig,
    actor: &Actor,
    a: NewAccount,
) -> Result<AccessView> {
    check(config, actor, CredentialKind::Account, &a.name, &a.groups)?;
    let chars = a.password.chars().count();
    if !(MIN_PASSWORD_CHARS..=MAX_PASSWORD_CHARS).contains(&chars) {
        return Err(Error::invalid(
            "password",
            format!("{chars} characters"),
            format!("must have {MIN_PASSWORD_CHARS}-{MAX_PASSWORD_CHARS} characters"),
        ));
    }
    let password = a.password;
    let hash = tokio::task::spawn_blocking(move || hash_password(&password))
        .await
        .map_err(|e| Error::backend("argon2", "hash the password", false, e))?;
    let credential = Credential {
        kind: CredentialKind::Account,
        name: a.name,
        secret_hash: hash,
        role: a.role.as_str().to_string(),
        groups: a.groups,
    };
    add(store, actor, credential, a.role).await
}

/// Adds a token, generated here; answers it with the token (shown this once).
pub(crate) async fn add_token(
    store: &dyn JobStore,
    config: &ServerConfig,
    actor: &Actor,
    t: NewToken,
) -> Result<AddedToken> {
    check(config, actor, CredentialKind::Token, &t.name, &t.groups)?;
    let (token, sha) = new_token();
    let credential = Credential {
        kind: CredentialKind::Token,
        name: t.name,
        secret_hash: sha,
        role: t.role.as_str().to_string(),
        groups: t.groups,
    };
    let view = add(store, actor, credential, t.role).await?;
    Ok(AddedToken { view, token })
}

/// Removes a stored account or token. Errors: [`Error::NotFound`] (or not within
/// the actor's groups); [`Error::Conflict`] for one of the configuration file.
pub(crate) async fn remove(
    store: &dyn JobStore,
    config: &ServerConfig,
    actor: &Actor,
    kind: CredentialKind,
    name: &str,
) -> Result<AccessView> {
    let not_found = || Error::NotFound {
        what: kind.as_str(),
        id: name.to_string(),
    };
    let Some(v) = store
        .credentials()
        .await?
        .iter()
        .filter(|r| r.credential.kind == kind && r.credential.name == name)
        .find_map(view)
    else {
        // Not the store's: the configuration file's (when within the actor's groups)
        // stays as it is; anything else is not there.
        let groups = match kind {
            CredentialKind::Account => config
                .users
                .iter()
                .find(|u| u.name == name)
                .map(|u| &u.groups),
            CredentialKind::Token => config
                .tokens
                .iter()
                .find(|t| t.name == name)
                .map(|t| &t.groups),
        };
        let configured = groups.is_some_and(|g| within(actor, g));
        return Err(if configured {
            Error::Conflict {
                what: kind.as_str(),
                id: name.to_string(),
                reason: "the configuration file holds it: edit the file and restart".into(),
            }
        } else {
            not_found()
        });
    };
    if !within(actor, &v.groups) {
        return Err(not_found());
    }
    let action = match kind {
        CredentialKind::Account => AuditAction::AccountRemove,
        CredentialKind::Token => AuditAction::TokenRemove,
    };
    if !store
        .remove_credential(kind, name, &entry(actor, action, &v))
        .await?
    {
        return Err(not_found());
    }
    Ok(v)
}
