//! The access operations in the admin API's document: accounts and tokens added
//! and removed at runtime.

use super::*;

/// This area's operations, in the router's order.
pub(super) fn operations() -> Vec<Operation> {
    vec![
        Operation {
            description: "The configuration file's accounts and tokens (source `configuration`) and those added at runtime (source `store`), never a hash. An admin limited to executor groups sees those limited to some of its groups.",
            ..op(
                ("get", "/api/v1/access"),
                "listAccess",
                "access",
                "admin",
                "Every account and token",
                Some(schema::<AccessList>),
                &[E401, E403, E503],
            )
        },
        Operation {
            description: "The password (12-1,024 characters) is kept as an argon2id hash. The name may not be one of the configuration file's accounts. An admin limited to executor groups adds only accounts limited to some of its groups. Every server of a cluster admits the account within 250 ms.",
            body: Some((schema::<crate::admin::access::NewAccount>, false)),
            ok: (
                201,
                "Created.",
                Some(schema::<crate::admin::access::AccessView>),
            ),
            ..op(
                ("post", "/api/v1/access/accounts"),
                "addAccount",
                "access",
                "admin",
                "Add an account",
                None,
                &[
                    E400,
                    E401,
                    E403,
                    (
                        409,
                        "`conflict` (an account has the name, here or in the configuration file)",
                    ),
                    E413,
                    E503,
                ],
            )
        },
        Operation {
            description: "Its sessions end: every server refuses them within 2 s (this one at once).",
            path_params: NAME,
            ..op(
                ("delete", "/api/v1/access/accounts/{name}"),
                "removeAccount",
                "access",
                "admin",
                "Remove an account added at runtime",
                Some(schema::<AccessRemoved>),
                &[
                    E400,
                    E401,
                    E403,
                    E404,
                    (409, "`conflict` (the configuration file holds it)"),
                    E503,
                ],
            )
        },
        Operation {
            description: "The server generates the token (`jw_` and 64 hex digits) and answers it this once; only its SHA-256 is kept. The name may not be one of the configuration file's tokens.",
            body: Some((schema::<crate::admin::access::NewToken>, false)),
            ok: (
                201,
                "Created.",
                Some(schema::<crate::admin::access::AddedToken>),
            ),
            ..op(
                ("post", "/api/v1/access/tokens"),
                "addToken",
                "access",
                "admin",
                "Add an API token",
                None,
                &[
                    E400,
                    E401,
                    E403,
                    (
                        409,
                        "`conflict` (a token has the name, here or in the configuration file)",
                    ),
                    E413,
                    E503,
                ],
            )
        },
        Operation {
            description: "Every server refuses it within 2 s (this one at once).",
            path_params: NAME,
            ..op(
                ("delete", "/api/v1/access/tokens/{name}"),
                "removeToken",
                "access",
                "admin",
                "Remove an API token added at runtime",
                Some(schema::<AccessRemoved>),
                &[
                    E400,
                    E401,
                    E403,
                    E404,
                    (409, "`conflict` (the configuration file holds it)"),
                    E503,
                ],
            )
        },
    ]
}
