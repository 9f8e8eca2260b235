//! `jobwheel access`: the accounts and tokens added at runtime, on a store (as
//! `cli:$USER`) or through a server (as the token's owner, an admin).

use super::api::Api;
use super::{Failure, Outcome, print_json, table};
use crate::admin::Role;
use crate::admin::access::{self, NewAccount, NewToken};
use crate::admin::config::ServerConfig;
use crate::record::CredentialKind;
use crate::store::JobStore;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Value, json};
use std::sync::Arc;

/// What `access` does.
#[derive(Subcommand, Debug)]
pub(crate) enum AccessCommand {
    /// Every account and token: the configuration file's and the store's.
    List,
    /// Adds an account; its password is read from standard input (one line) or
    /// `--password-from-env`.
    AddAccount(AddArgs),
    /// Adds an API token and prints it (once: only its SHA-256 is kept).
    AddToken(AddArgs),
    /// Removes an account added at runtime (its sessions end).
    RmAccount {
        /// Its name.
        name: String,
    },
    /// Removes a token added at runtime.
    RmToken {
        /// Its name.
        name: String,
    },
}

/// The new account's or token's name, role and groups.
#[derive(Args, Debug)]
pub(crate) struct AddArgs {
    /// Its name: 1-64 of `[A-Za-z0-9._@-]`.
    name: String,
    /// What it may do.
    #[arg(long, value_enum)]
    role: RoleArg,
    /// The only executor groups it acts on (comma-separated); every job without it.
    #[arg(long, value_delimiter = ',')]
    groups: Option<Vec<String>>,
    /// An account's password from this environment variable, not standard input.
    #[arg(long)]
    password_from_env: Option<String>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum RoleArg {
    Viewer,
    Operator,
    Admin,
}

impl From<RoleArg> for Role {
    fn from(r: RoleArg) -> Role {
        match r {
            RoleArg::Viewer => Role::Viewer,
            RoleArg::Operator => Role::Operator,
            RoleArg::Admin => Role::Admin,
        }
    }
}

fn password(args: &AddArgs) -> Result<String, Failure> {
    match &args.password_from_env {
        Some(var) => std::env::var(var)
            .map_err(|_| Failure::Usage(format!("invalid --password-from-env {var:?}: not set"))),
        None => {
            let mut line = String::new();
            std::io::stdin()
                .read_line(&mut line)
                .map_err(|e| Failure::Failed(format!("cannot read standard input: {e}")))?;
            Ok(line.trim_end_matches(['\r', '\n']).to_string())
        }
    }
}

fn show(items: &[Value], json_out: bool) -> Outcome {
    if json_out {
        return print_json(&items);
    }
    let cell = |v: &Value| match v {
        Value::Null => "-".to_string(),
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .map(|x| x.as_str().unwrap_or("").to_string())
            .collect::<Vec<_>>()
            .join(","),
        other => other.to_string(),
    };
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|i| {
            ["kind", "name", "role", "groups", "source", "created_at"]
                .iter()
                .map(|k| cell(&i[*k]))
                .collect()
        })
        .collect();
    table::print(
        &["kind", "name", "role", "groups", "source", "added"],
        &rows,
    );
    Ok(())
}

fn added(v: Value, json_out: bool) -> Outcome {
    if json_out {
        return print_json(&v);
    }
    if let Some(t) = v["token"].as_str() {
        println!("{t}");
        eprintln!("the token is shown once: only its SHA-256 is kept");
        return Ok(());
    }
    show(&[v], false)
}

fn value(v: impl serde::Serialize) -> Result<Value, Failure> {
    serde_json::to_value(v).map_err(|e| Failure::Failed(e.to_string()))
}

/// `access` on a store, as `cli:$USER`; the configuration file (when read) names
/// the accounts and tokens that are not the store's.
pub(crate) async fn on_store(
    store: &Arc<dyn JobStore>,
    config: Option<&ServerConfig>,
    command: AccessCommand,
    json_out: bool,
) -> Outcome {
    let empty = ServerConfig::default();
    let config = config.unwrap_or(&empty);
    let actor = super::store::actor();
    let store = store.as_ref();
    match command {
        AccessCommand::List => {
            let items = access::list(store, config, &actor).await?;
            show(
                &value(items)?.as_array().cloned().unwrap_or_default(),
                json_out,
            )
        }
        AccessCommand::AddAccount(a) => {
            let new = NewAccount {
                password: password(&a)?,
                name: a.name,
                role: a.role.into(),
                groups: a.groups,
            };
            added(
                value(access::add_account(store, config, &actor, new).await?)?,
                json_out,
            )
        }
        AccessCommand::AddToken(a) => {
            let new = NewToken {
                name: a.name,
                role: a.role.into(),
                groups: a.groups,
            };
            added(
                value(access::add_token(store, config, &actor, new).await?)?,
                json_out,
            )
        }
        AccessCommand::RmAccount { name } => {
            access::remove(store, config, &actor, CredentialKind::Account, &name).await?;
            Ok(())
        }
        AccessCommand::RmToken { name } => {
            access::remove(store, config, &actor, CredentialKind::Token, &name).await?;
            Ok(())
        }
    }
}

/// `access` through a server's admin API.
pub(crate) async fn on_server(api: &Api, command: AccessCommand, json_out: bool) -> Outcome {
    match command {
        AccessCommand::List => {
            let v = api.call("GET", "/access", None).await?;
            show(
                &v["items"].as_array().cloned().unwrap_or_default(),
                json_out,
            )
        }
        AccessCommand::AddAccount(a) => {
            let body = json!({"name": a.name, "password": password(&a)?, "role": Role::from(a.role), "groups": a.groups});
            added(
                api.call("POST", "/access/accounts", Some(body.to_string()))
                    .await?,
                json_out,
            )
        }
        AccessCommand::AddToken(a) => {
            let body = json!({"name": a.name, "role": Role::from(a.role), "groups": a.groups});
            added(
                api.call("POST", "/access/tokens", Some(body.to_string()))
                    .await?,
                json_out,
            )
        }
        AccessCommand::RmAccount { name } => api
            .call(
                "DELETE",
                &format!("/access/accounts/{}", super::api::enc(&name)),
                None,
            )
            .await
            .map(|_| ()),
        AccessCommand::RmToken { name } => api
            .call(
                "DELETE",
                &format!("/access/tokens/{}", super::api::enc(&name)),
                None,
            )
            .await
            .map(|_| ()),
    }
}
