//! Tables for people, and the escaping of what they show: job ids, handler names,
//! payloads and error messages are text anyone who can create a job or fail a run
//! controls, so control characters (a terminal's escape sequences among them) are
//! shown escaped, never written raw.

/// `text` with every control character escaped (`\n`, `\u{1b}`, …).
pub fn escape(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_string();
    }
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Prints `rows` under `header`, each column as wide as its widest cell, cells
/// escaped; a row of a header's width only, `(none)` when there are no rows.
pub fn print(header: &[&str], rows: &[Vec<String>]) {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| escape(c)).collect())
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let text: Vec<String> = cells
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", text.join("  ").trim_end());
    };
    line(&mut header.iter().copied());
    for row in &rows {
        line(&mut row.iter().map(String::as_str));
    }
    if rows.is_empty() {
        println!("(none)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(escape("report <b>"), "report <b>");
        assert_eq!(escape("a\nb\u{1b}[31m"), "a\\nb\\u{1b}[31m");
        assert_eq!(escape("日報"), "日報");
    }
}
