//! `jobwheel`, the program: a thin main over [`jobwheel::admin::cli`] (feature
//! `server`). See `jobwheel --help`, README.md and docs/book/src/server.md.

fn main() -> std::process::ExitCode {
    jobwheel::admin::cli::main()
}
