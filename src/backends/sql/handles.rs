//! The public handles of an SQL backend, written once: a store (every part of
//! [`JobStore`](crate::JobStore), forwarded to [`SqlStore`](super::SqlStore)) and a lock
//! provider ([`SqlLocks`](super::locks::SqlLocks)), both over one dialect and its pool.

/// Declares `$store` and `$locks` (delegating to `$locks_impl`, a
/// [`LocksOver`](super::locks::LocksOver) the dialect) over `$dialect`, whose inherent
/// `fn new(pool: $pool, $names: $names_ty) -> Result<Self>` checks the table names:
/// the store's `from_pool`, `pool`, `migrate` and `locks`, the lock provider's `new`,
/// and the setters every builder shares (`$builder` has fields `prefix: String`,
/// `max_connections: u32` and `connect_timeout: Duration`).
macro_rules! sql_handles {
    (
        $(#[$store_doc:meta])* store $store:ident;
        $(#[$locks_doc:meta])* locks $locks:ident over $locks_impl:ty;
        builder $builder:ident;
        dialect $dialect:ident, pool $pool:ty, names $names:ident: $names_ty:ty;
    ) => {
        impl $builder {
            /// Table prefix (default `jobwheel_`): up to 40 characters of
            /// `[A-Za-z0-9_]`, not starting with a digit. Deployments with different
            /// prefixes share a database without meeting.
            pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
                self.prefix = prefix.into();
                self
            }

            /// Pool size, at least 1 (the default is in the store's `builder`).
            pub fn max_connections(mut self, n: u32) -> Self {
                self.max_connections = n;
                self
            }

            /// How long connecting may take before it fails with the server's address
            /// and the cause (default 5 s).
            pub fn connect_timeout(mut self, timeout: std::time::Duration) -> Self {
                self.connect_timeout = timeout;
                self
            }

            /// The pool size, or an error naming `<backend>.max_connections` when 0.
            fn pool_size(&self) -> $crate::error::Result<u32> {
                if self.max_connections == 0 {
                    let field = match <$dialect as $crate::backends::sql::Dialect>::NAME {
                        "sqlite" => "sqlite.max_connections",
                        "postgres" => "postgres.max_connections",
                        _ => "mysql.max_connections",
                    };
                    return Err($crate::error::Error::invalid(field, 0, "must be at least 1"));
                }
                Ok(self.max_connections)
            }
        }

        $(#[$store_doc])*
        #[derive(Debug, Clone)]
        pub struct $store {
            inner: $crate::backends::sql::SqlStore<$dialect>,
        }

        $crate::store::delegate_store!($store => inner);

        impl $store {
            /// A store on an existing pool (for example the application's own), with
            /// the given table names. Errors when a name is invalid, naming the field.
            pub fn from_pool(pool: $pool, $names: $names_ty) -> $crate::error::Result<Self> {
                Ok($store {
                    inner: $crate::backends::sql::SqlStore {
                        d: $dialect::new(pool, $names)?,
                    },
                })
            }

            /// The pool.
            pub fn pool(&self) -> &$pool {
                &self.inner.d.pool
            }

            /// Runs the migrations not yet applied to these tables. Idempotent: nodes
            /// running it at once take turns (on a lock the database holds for the
            /// whole run, or on SQLite's write lock with retries). Errors with
            /// [`Error::SchemaTooNew`](crate::Error::SchemaTooNew) when a newer jobwheel
            /// migrated them, and names the version of a migration that was edited.
            pub async fn migrate(&self) -> $crate::error::Result<()> {
                $crate::backends::sql::migrate::run(&self.inner.d).await
            }

            /// Leases in this store's locks table, on its pool.
            pub fn locks(&self) -> $locks {
                $locks {
                    inner: <$locks_impl as $crate::backends::sql::locks::LocksOver<$dialect>>::over(
                        self.inner.d.clone(),
                    ),
                }
            }
        }

        $(#[$locks_doc])*
        #[derive(Debug, Clone)]
        pub struct $locks {
            inner: $locks_impl,
        }

        $crate::lock::delegate_locks!($locks => inner, <$dialect as $crate::backends::sql::Dialect>::NAME);

        impl $locks {
            /// Leases in the locks table of these names on `pool` (the store's
            /// `locks()` is the same with the store's pool and names). The table is
            /// created by the store's `migrate`. Errors when a name is invalid.
            pub fn new(pool: $pool, $names: $names_ty) -> $crate::error::Result<Self> {
                Ok($locks {
                    inner: <$locks_impl as $crate::backends::sql::locks::LocksOver<$dialect>>::over(
                        $dialect::new(pool, $names)?,
                    ),
                })
            }
        }
    };
}
pub(crate) use sql_handles;
