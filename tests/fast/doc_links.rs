//! The docs' links: every relative link in README.md, CHANGELOG.md, docs/*.md and
//! the book's pages (docs/book/src/) points at a file of the repository, and every
//! `#anchor` at a heading of the page it names (GitHub's anchors, which mdBook's
//! are too: lower case, punctuation dropped, spaces as hyphens). Links inside fenced
//! code blocks are not links. The book's SUMMARY.md lists each of its pages once.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The pages checked.
fn pages(root: &Path) -> Vec<PathBuf> {
    let mut pages = vec![root.join("README.md"), root.join("CHANGELOG.md")];
    pages.extend(markdown_in(&root.join("docs")));
    pages.extend(markdown_in(&root.join("docs/book/src")));
    pages.sort();
    pages
}

/// The Markdown files directly in `dir`.
fn markdown_in(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect()
}

#[test]
fn the_books_summary_lists_each_page_once() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/book/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    let mut listed: Vec<String> = prose(&summary)
        .into_iter()
        .flat_map(links)
        .map(String::from)
        .collect();
    listed.sort();
    let mut pages: Vec<String> = markdown_in(&src)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|n| n != "SUMMARY.md")
        .collect();
    pages.sort();
    assert!(pages.len() >= 9, "the book has its chapters: {pages:?}");
    assert_eq!(listed, pages, "SUMMARY.md lists every page once");
}

/// The text outside fenced code blocks, line by line.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push(line);
        }
    }
    out
}

/// GitHub's anchor of a heading's text.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a page's headings (a repeated heading gets `-1`, `-2`, …).
fn anchors(text: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    for line in prose(text) {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let heading = heading.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let base = anchor(heading);
        let mut a = base.clone();
        let mut n = 0;
        while !seen.insert(a.clone()) {
            n += 1;
            a = format!("{base}-{n}");
        }
    }
    seen
}

/// The targets of a line's inline links, `[text](target)`.
fn links(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let end = rest.find(')').unwrap_or(rest.len());
        out.push(rest[..end].trim());
        rest = &rest[end..];
    }
    out
}

#[test]
fn every_relative_link_and_anchor_in_the_docs_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in pages(root) {
        let text = std::fs::read_to_string(&page).unwrap();
        let dir = page.parent().unwrap();
        for line in prose(&text) {
            for target in links(line) {
                if target.contains("://") || target.starts_with("mailto:") || target.is_empty() {
                    continue;
                }
                checked += 1;
                let (file, frag) = target.split_once('#').unwrap_or((target, ""));
                let path = if file.is_empty() {
                    page.clone()
                } else {
                    dir.join(file)
                };
                let name = page.strip_prefix(root).unwrap().display().to_string();
                if !path.exists() {
                    broken.push(format!("{name}: {target}: no such file"));
                    continue;
                }
                if !frag.is_empty() && path.extension().is_some_and(|e| e == "md") {
                    let there = std::fs::read_to_string(&path).unwrap();
                    if !anchors(&there).contains(frag) {
                        broken.push(format!("{name}: {target}: no such heading"));
                    }
                }
            }
        }
    }
    assert!(checked > 20, "the pages hold links: {checked}");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn anchors_are_githubs() {
    assert_eq!(
        anchor(" Remote executors (`remote` feature)"),
        "remote-executors-remote-feature"
    );
    assert_eq!(
        anchor(" A fire in three row writes: the targets"),
        "a-fire-in-three-row-writes-the-targets"
    );
    let a = anchors("# A\n```\n# not a heading\n```\n## A\n#nope\n");
    assert_eq!(
        a,
        ["a", "a-1"]
            .into_iter()
            .map(String::from)
            .collect::<HashSet<_>>()
    );
}
