//! The crate's layout as docs/book/src/architecture.md draws it: every module under `src/` on
//! a floor of the "Floors" table, each using only modules on lower floors; no module
//! mounted from elsewhere with `#[path]`; every path the module map names exists.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The floors table of docs/book/src/architecture.md: module name → floor.
fn floors(doc: &str) -> BTreeMap<String, u32> {
    let mut lines = doc
        .lines()
        .skip_while(|l| l.trim() != "| floor | modules |");
    assert!(
        lines.next().is_some(),
        "docs/book/src/architecture.md has a floors table"
    );
    let mut out = BTreeMap::new();
    for line in lines.skip(1).take_while(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let floor: u32 = cells[1].parse().expect("a floor is a number");
        for name in backticked(cells[2]) {
            assert!(
                out.insert(name.clone(), floor).is_none(),
                "{name} is on one floor"
            );
        }
    }
    out
}

/// The `code spans` of `text`.
fn backticked(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module of `src/` a file belongs to: its first path component, without `.rs`
/// (`None` for `lib.rs` and the binaries, which stand above every module).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let first = file.strip_prefix(src).unwrap().components().next()?;
    let name = first.as_os_str().to_str()?.trim_end_matches(".rs");
    (name != "lib" && name != "bin").then(|| name.to_string())
}

/// Every module of the crate each file's code names through `crate::` (comments
/// left out), by using module.
fn arrows() -> BTreeMap<String, BTreeSet<(String, String)>> {
    let src = Path::new(ROOT).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut out: BTreeMap<String, BTreeSet<(String, String)>> = BTreeMap::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            !text.lines().any(|l| l.trim_start().starts_with("#[path")),
            "{} mounts a module from elsewhere with #[path]",
            file.display()
        );
        let Some(from) = module_of(&src, &file) else {
            continue;
        };
        let uses = out.entry(from.clone()).or_default();
        let shown = file.strip_prefix(ROOT).unwrap().display().to_string();
        for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (at, _) in line.match_indices("crate::") {
                let name: String = line[at + 7..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                if !name.is_empty() && name != from {
                    uses.insert((name, shown.clone()));
                }
            }
        }
    }
    out
}

#[test]
fn every_module_uses_only_lower_floors() {
    let doc =
        std::fs::read_to_string(Path::new(ROOT).join("docs/book/src/architecture.md")).unwrap();
    let floors = floors(&doc);
    let arrows = arrows();
    let modules: BTreeSet<&String> = arrows.keys().collect();
    let listed: BTreeSet<&String> = floors.keys().collect();
    assert_eq!(
        modules, listed,
        "the floors table lists exactly the modules under src/"
    );
    let mut wrong = Vec::new();
    for (from, uses) in &arrows {
        for (to, file) in uses {
            match floors.get(to) {
                Some(f) if *f < floors[from] => {}
                Some(f) => wrong.push(format!(
                    "{file}: {from} (floor {}) uses {to} (floor {f})",
                    floors[from]
                )),
                None => wrong.push(format!("{file}: {from} uses {to}, which is on no floor")),
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "arrows the floors forbid:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_module_map_names_paths_that_exist() {
    let doc =
        std::fs::read_to_string(Path::new(ROOT).join("docs/book/src/architecture.md")).unwrap();
    let map: Vec<&str> = doc
        .lines()
        .skip_while(|l| l.trim() != "## Module map")
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .filter(|l| l.starts_with("| `"))
        .collect();
    assert!(map.len() > 10, "the module map has its rows");
    let mut missing = Vec::new();
    for row in map {
        let first = row.split('|').nth(1).unwrap();
        for path in backticked(first) {
            if !Path::new(ROOT).join(&path).exists() {
                missing.push(path);
            }
        }
    }
    assert!(missing.is_empty(), "the module map names {missing:?}");
}

#[test]
fn the_checks_see_an_arrow_back_up() {
    // The reader itself: a line that names a module, and one in a comment.
    let src = Path::new(ROOT).join("src");
    assert_eq!(
        module_of(&src, &src.join("backends/sql/mod.rs")).as_deref(),
        Some("backends")
    );
    assert_eq!(module_of(&src, &src.join("lib.rs")), None);
    let floors =
        floors("| floor | modules |\n|---|---|\n| 2 | `engine` |\n| 1 | `store`, `time` |\n");
    assert_eq!(floors["engine"], 2);
    assert_eq!(floors["time"], 1);
    let arrows = arrows();
    assert!(
        arrows["store"].iter().all(|(to, _)| to != "engine"),
        "the store knows nothing of the engine"
    );
    assert!(
        arrows["engine"].iter().any(|(to, _)| to == "store"),
        "the engine's arrow to the store is read"
    );
}
