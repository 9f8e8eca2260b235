//! Tables for people, and the escaping of what they show: job ids, handler names,
//! payloads and error messages are text anyone who can create a job or fail a run
//! controls, so control characters (a terminal's escape sequences among them) are
//! shown escaped, never written raw.

/// `text` with every control character escaped (`\n`, `\u{1b}`, …).
pub(crate) fn escape(text: &str) -> String {
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

/// Columns a cell takes in a terminal: CJK characters and most emoji take two,
/// combining marks none (`unicode-width`).
fn width(text: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(text)
}

/// Prints `rows` under `header`, each column as wide as its widest cell in terminal
/// columns, cells escaped; a row of a header's width only, `(none)` when there are
/// no rows.
pub(crate) fn print(header: &[&str], rows: &[Vec<String>]) {
    for line in lines(header, rows) {
        println!("{line}");
    }
}

/// The lines [`print`] writes.
fn lines(header: &[&str], rows: &[Vec<String>]) -> Vec<String> {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| escape(c)).collect())
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| width(h)).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(width(cell));
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let text: Vec<String> = cells
            .zip(&widths)
            .map(|(c, w)| format!("{c}{}", " ".repeat(w.saturating_sub(width(c)))))
            .collect();
        text.join("  ").trim_end().to_string()
    };
    let mut out = vec![line(&mut header.iter().copied())];
    for row in &rows {
        out.push(line(&mut row.iter().map(String::as_str)));
    }
    if rows.is_empty() {
        out.push("(none)".to_string());
    }
    out
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

    #[test]
    fn wide_characters_keep_the_columns_aligned() {
        let rows = vec![
            vec!["日報".to_string(), "ok".to_string()],
            vec!["report".to_string(), "ok".to_string()],
            vec!["🚀x".to_string(), "ok".to_string()],
        ];
        let lines = lines(&["id", "status"], &rows);
        // The second column starts at the same terminal column on every line.
        let starts: Vec<usize> = lines
            .iter()
            .map(|l| width(&l[..l.rfind("ok").or(l.rfind("status")).unwrap()]))
            .collect();
        assert_eq!(starts, [8, 8, 8, 8], "{lines:#?}");
    }
}
