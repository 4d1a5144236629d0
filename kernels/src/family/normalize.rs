//! Source text with comments and formatting removed, and its digest: what a kernel family's
//! version is computed from, so that editing a comment or reformatting changes no key.

/// `text` without `//` and `/* */` comments, with whitespace runs dropped (kept as one space
/// only between two word characters) and trailing commas before a closing bracket dropped.
/// String and character literals are kept as they are.
pub fn normalize(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut pending_space = false;
    let word = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        let next = c.get(i + 1).copied();
        if ch == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
            pending_space = true;
            continue;
        }
        if ch == '/' && next == Some('*') {
            let mut depth = 0usize;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            pending_space = true;
            continue;
        }
        if ch.is_whitespace() {
            pending_space = true;
            i += 1;
            continue;
        }
        if pending_space && out.chars().last().is_some_and(word) && word(ch) {
            out.push(' ');
        }
        pending_space = false;
        if ch == '"' {
            // A string literal, escapes included, copied whole.
            out.push(ch);
            i += 1;
            while i < c.len() {
                out.push(c[i]);
                if c[i] == '\\' && i + 1 < c.len() {
                    out.push(c[i + 1]);
                    i += 2;
                    continue;
                }
                i += 1;
                if c[i - 1] == '"' {
                    break;
                }
            }
            continue;
        }
        if ch == '\'' {
            // A character literal ('x', '\n', '\''); otherwise a Rust lifetime.
            let end = if next == Some('\\') {
                (i + 2..c.len().min(i + 12)).find(|&j| c[j] == '\'')
            } else if c.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            if let Some(end) = end {
                out.extend(&c[i..=end]);
                i = end + 1;
                continue;
            }
        }
        if matches!(ch, ')' | ']' | '}') && out.ends_with(',') {
            out.pop();
        }
        out.push(ch);
        i += 1;
    }
    out
}

/// FNV-1a (64 bit) of bytes, continuing from `h` (start with [`FNV_OFFSET`]).
pub fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// FNV-1a's offset basis.
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// The digest of a family's files, given each file's path and text, as 16 hex digits.
pub fn family_digest<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut h = FNV_OFFSET;
    for (path, text) in files {
        h = fnv1a(h, path.as_bytes());
        h = fnv1a(h, &[0]);
        h = fnv1a(h, normalize(text).as_bytes());
        h = fnv1a(h, &[0]);
    }
    format!("{h:016x}")
}
