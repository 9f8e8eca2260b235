//! `jobwheel access`: the accounts and tokens added at runtime, on a store (as
//! `cli:$USER`) or through a server (as the token's owner, an admin).

use super::transport::Transport;
use super::{Failure, Outcome, print_json, table};
use crate::admin::Role;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Value, json};

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

/// `access …`: on a store (as `cli:$USER`; the configuration file, when read,
/// names the accounts and tokens that are not the store's) or through a server
/// (as the token's owner, an admin), the same.
pub(crate) async fn access(api: &dyn Transport, command: AccessCommand, json_out: bool) -> Outcome {
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
                &format!("/access/accounts/{}", super::verbs::enc(&name)),
                None,
            )
            .await
            .map(|_| ()),
        AccessCommand::RmToken { name } => api
            .call(
                "DELETE",
                &format!("/access/tokens/{}", super::verbs::enc(&name)),
                None,
            )
            .await
            .map(|_| ()),
    }
}
