//! Aligned text tables for the terminal, with an optional coloured column.

/// Renders `rows` (the first is the header) in aligned columns. `color` gives, for a data row's
/// cell in column `col`, an ANSI colour code; `None` prints no colour (pipes, `NO_COLOR`).
pub fn render(
    rows: &[Vec<String>],
    color: Option<(usize, &dyn Fn(usize) -> &'static str)>,
) -> String {
    let cols = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            match color {
                Some((col, code)) if i > 0 && c == col => {
                    line.push_str(&format!("\x1b[{}m{cell}\x1b[0m", code(i - 1)));
                }
                _ => line.push_str(cell),
            }
            if c + 1 < cols {
                line.push_str(&" ".repeat(widths[c] - cell.chars().count() + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
