//! Just enough of Rust's lexical structure to find module references:
//! comments and literals blanked, `#[cfg(test)]` items cut out, and the
//! first segment of every `crate::` (or root-reaching `super::`) path.

/// `source` with comments, string and character literals and
/// `#[cfg(test)]` items replaced by spaces (line breaks kept, so line
/// numbers still hold). The names of `#[cfg(test)] mod name;` declarations
/// are pushed to `test_modules`.
pub(crate) fn strip(source: &str, test_modules: &mut Vec<String>) -> String {
    let mut chars: Vec<char> = source.chars().collect();
    blank_comments_and_literals(&mut chars);
    blank_test_items(&mut chars, test_modules);
    chars.into_iter().collect()
}

/// The number of lines of `source` outside `#[cfg(test)]` items (comments
/// and blank lines count: they are part of what a reader reads).
pub(crate) fn non_test_lines(source: &str) -> usize {
    let mut commentless: Vec<char> = source.chars().collect();
    blank_comments_and_literals(&mut commentless);
    let mut stripped = commentless.clone();
    blank_test_items(&mut stripped, &mut Vec::new());
    let commentless: String = commentless.into_iter().collect();
    let stripped: String = stripped.into_iter().collect();
    commentless
        .lines()
        .zip(stripped.lines())
        .filter(|(before, after)| before.trim().is_empty() || !after.trim().is_empty())
        .count()
}

fn blank(chars: &mut [char], from: usize, to: usize) {
    let to = to.min(chars.len());
    for c in &mut chars[from..to] {
        if *c != '\n' {
            *c = ' ';
        }
    }
}

fn blank_comments_and_literals(c: &mut [char]) {
    let n = c.len();
    let mut i = 0;
    while i < n {
        match c[i] {
            '/' if i + 1 < n && c[i + 1] == '/' => {
                let start = i;
                while i < n && c[i] != '\n' {
                    i += 1;
                }
                blank(c, start, i);
            }
            '/' if i + 1 < n && c[i + 1] == '*' => {
                let start = i;
                let mut depth = 0usize;
                while i < n {
                    if c[i] == '/' && i + 1 < n && c[i + 1] == '*' {
                        depth += 1;
                        i += 2;
                    } else if c[i] == '*' && i + 1 < n && c[i + 1] == '/' {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
                blank(c, start, i);
            }
            'r' if is_raw_string_start(c, i) => {
                let start = i;
                i += 1;
                let mut hashes = 0;
                while c[i] == '#' {
                    hashes += 1;
                    i += 1;
                }
                i += 1; // the opening quote
                'scan: while i < n {
                    if c[i] == '"' {
                        let mut k = 0;
                        while k < hashes && i + 1 + k < n && c[i + 1 + k] == '#' {
                            k += 1;
                        }
                        if k == hashes {
                            i += 1 + hashes;
                            break 'scan;
                        }
                    }
                    i += 1;
                }
                blank(c, start, i);
            }
            '"' => {
                let start = i;
                i += 1;
                while i < n && c[i] != '"' {
                    if c[i] == '\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
                blank(c, start, i);
            }
            '\'' => {
                // A character literal ('x', '\n', '\u{..}'), or a lifetime
                // ('a), which stays.
                if i + 1 < n && c[i + 1] == '\\' {
                    let start = i;
                    i += 2;
                    while i < n && c[i] != '\'' {
                        i += 1;
                    }
                    i += 1;
                    blank(c, start, i);
                } else if i + 2 < n && c[i + 2] == '\'' {
                    blank(c, i, i + 3);
                    i += 3;
                } else {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
}

fn is_raw_string_start(c: &[char], i: usize) -> bool {
    if i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_') {
        return false;
    }
    let mut j = i + 1;
    while j < c.len() && c[j] == '#' {
        j += 1;
    }
    j < c.len() && c[j] == '"'
}

/// Skips whitespace from `i`; the index of the next other character.
fn skip_ws(c: &[char], mut i: usize) -> usize {
    while i < c.len() && c[i].is_whitespace() {
        i += 1;
    }
    i
}

/// Matches `word` at `i` (after whitespace); the index after it.
fn eat(c: &[char], i: usize, word: &str) -> Option<usize> {
    let i = skip_ws(c, i);
    let w: Vec<char> = word.chars().collect();
    if c.len() >= i + w.len() && c[i..i + w.len()] == w[..] {
        let end = i + w.len();
        let ident_like = w.last().is_some_and(|l| l.is_alphanumeric());
        if ident_like && end < c.len() && (c[end].is_alphanumeric() || c[end] == '_') {
            return None;
        }
        Some(end)
    } else {
        None
    }
}

fn ident_at(c: &[char], i: usize) -> Option<(String, usize)> {
    let i = skip_ws(c, i);
    let start = i;
    let mut j = i;
    while j < c.len() && (c[j].is_alphanumeric() || c[j] == '_') {
        j += 1;
    }
    if j > start && !c[start].is_ascii_digit() {
        Some((c[start..j].iter().collect(), j))
    } else {
        None
    }
}

/// The index after the group opened at `i` (`(`, `[` or `{`).
fn matching(c: &[char], i: usize) -> usize {
    let mut depth = 0usize;
    let mut j = i;
    while j < c.len() {
        match c[j] {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return j + 1;
                }
            }
            _ => {}
        }
        j += 1;
    }
    c.len()
}

fn blank_test_items(c: &mut [char], test_modules: &mut Vec<String>) {
    let mut i = 0;
    while i < c.len() {
        if c[i] != '#' {
            i += 1;
            continue;
        }
        let start = i;
        let is_cfg_test = eat(c, i + 1, "[")
            .and_then(|j| eat(c, j, "cfg"))
            .and_then(|j| eat(c, j, "("))
            .and_then(|j| eat(c, j, "test"))
            .and_then(|j| eat(c, j, ")"))
            .and_then(|j| eat(c, j, "]"));
        let Some(mut j) = is_cfg_test else {
            i += 1;
            continue;
        };
        // Further attributes of the same item.
        loop {
            let k = skip_ws(c, j);
            if k < c.len() && c[k] == '#' {
                let open = skip_ws(c, k + 1);
                if open < c.len() && c[open] == '[' {
                    j = matching(c, open);
                    continue;
                }
            }
            break;
        }
        // `mod name;` declares a test-only file.
        let mut k = j;
        if let Some(after_pub) = eat(c, k, "pub") {
            k = after_pub;
            let p = skip_ws(c, k);
            if p < c.len() && c[p] == '(' {
                k = matching(c, p);
            }
        }
        if let Some(after_mod) = eat(c, k, "mod") {
            if let Some((name, after_name)) = ident_at(c, after_mod) {
                if let Some(end) = eat(c, after_name, ";") {
                    test_modules.push(name);
                    blank(c, start, end);
                    i = end;
                    continue;
                }
            }
        }
        // Any other item: up to its `;` or through its `{ … }` block.
        let mut end = j;
        while end < c.len() {
            match c[end] {
                ';' => {
                    end += 1;
                    break;
                }
                '{' => {
                    end = matching(c, end);
                    break;
                }
                '(' | '[' => end = matching(c, end),
                _ => end += 1,
            }
        }
        blank(c, start, end);
        i = end;
    }
}

fn line_of(c: &[char], i: usize) -> usize {
    1 + c[..i].iter().filter(|&&ch| ch == '\n').count()
}

/// The first segments of the paths that start at `i` (after a `::`): one
/// identifier, or each entry of a `{…}` group.
fn first_segments(c: &[char], i: usize, out: &mut Vec<(String, usize)>) {
    let k = skip_ws(c, i);
    if k < c.len() && c[k] == '{' {
        let end = matching(c, k);
        let mut depth = 0usize;
        let mut expect = true;
        let mut j = k + 1;
        while j < end.saturating_sub(1) {
            match c[j] {
                '{' => depth += 1,
                '}' => depth = depth.saturating_sub(1),
                ',' if depth == 0 => expect = true,
                ch if expect && depth == 0 && (ch.is_alphabetic() || ch == '_') => {
                    if let Some((name, after)) = ident_at(c, j) {
                        if name != "self" {
                            out.push((name, line_of(c, j)));
                        }
                        expect = false;
                        j = after;
                        continue;
                    }
                }
                _ => {}
            }
            j += 1;
        }
    } else if let Some((name, _)) = ident_at(c, k) {
        out.push((name, line_of(c, k)));
    }
}

/// The first segment (and line) of every path in `text` that reaches the
/// crate root: `crate::x…`, `crate::{x, y…}`, and `super::…` chains that
/// climb `depth` levels or more (a file of top-level module `a` at
/// `src/a/b.rs` has depth 2). `$crate` (macros) is not followed.
pub(crate) fn references(text: &str, depth: usize) -> Vec<(String, usize)> {
    let c: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let boundary =
            i == 0 || !(c[i - 1].is_alphanumeric() || c[i - 1] == '_' || c[i - 1] == '$');
        if !boundary {
            i += 1;
            continue;
        }
        if let Some(after) = eat(&c, i, "crate").filter(|_| c[i] == 'c') {
            if let Some(path) = eat(&c, after, "::") {
                first_segments(&c, path, &mut out);
            }
            i = after;
            continue;
        }
        if c[i] == 's' && is_path_start(&c, i) {
            let mut supers = 0;
            let mut j = i;
            while let Some(after) = eat(&c, j, "super") {
                match eat(&c, after, "::") {
                    Some(next) => {
                        supers += 1;
                        j = next;
                    }
                    None => break,
                }
            }
            if supers > 0 {
                if supers >= depth {
                    first_segments(&c, j, &mut out);
                }
                i = j;
                continue;
            }
        }
        i += 1;
    }
    out
}

/// `super` at `i` starts a path (is not a later segment of one).
fn is_path_start(c: &[char], i: usize) -> bool {
    let mut k = i;
    while k > 0 && c[k - 1].is_whitespace() {
        k -= 1;
    }
    !(k >= 2 && c[k - 1] == ':' && c[k - 2] == ':')
}

/// The root's `pub use` (and `pub(crate) use`) re-exports: each exported
/// name with the top-level module it comes from.
pub(crate) fn reexports(text: &str) -> Vec<(String, String)> {
    let c: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let boundary = i == 0 || !(c[i - 1].is_alphanumeric() || c[i - 1] == '_');
        let Some(mut j) = eat(&c, i, "pub").filter(|_| boundary && c[i] == 'p') else {
            i += 1;
            continue;
        };
        let p = skip_ws(&c, j);
        if p < c.len() && c[p] == '(' {
            j = matching(&c, p);
        }
        let Some(mut j) = eat(&c, j, "use") else {
            i += 1;
            continue;
        };
        if let Some(after) = eat(&c, j, "crate").and_then(|a| eat(&c, a, "::")) {
            j = after;
        } else if let Some(after) = eat(&c, j, "self").and_then(|a| eat(&c, a, "::")) {
            j = after;
        }
        let Some((module, after)) = ident_at(&c, j) else {
            i += 1;
            continue;
        };
        let mut end = after;
        while end < c.len() && c[end] != ';' {
            end += 1;
        }
        for name in leaf_names(&c[after..end]) {
            out.push((name, module.clone()));
        }
        i = end;
    }
    out
}

/// The names a use tree brings in: each path's last identifier, or its
/// alias after `as`; `self` and globs bring nothing nameable.
fn leaf_names(tree: &[char]) -> Vec<String> {
    let mut names = Vec::new();
    let mut current: Option<String> = None;
    let mut alias_next = false;
    let mut i = 0;
    let flush = |current: &mut Option<String>, names: &mut Vec<String>| {
        if let Some(n) = current.take() {
            if n != "self" {
                names.push(n);
            }
        }
    };
    while i < tree.len() {
        let ch = tree[i];
        if ch.is_alphabetic() || ch == '_' {
            let (word, after) = ident_at(tree, i).unwrap_or_default();
            if word == "as" {
                alias_next = true;
            } else if alias_next {
                current = Some(word);
                alias_next = false;
            } else {
                current = Some(word);
            }
            i = after.max(i + 1);
            continue;
        }
        if ch == ',' || ch == '}' || ch == '{' {
            if ch != '{' {
                flush(&mut current, &mut names);
            } else {
                current = None;
            }
        }
        i += 1;
    }
    flush(&mut current, &mut names);
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_strings_and_chars_are_blanked_lines_kept() {
        let src = "// crate::a\nlet s = \"crate::b\"; /* crate::c\n */ let c = '\"'; let r = r#\"crate::d\"#;\nuse crate::e;";
        let text = strip(src, &mut Vec::new());
        assert_eq!(text.lines().count(), 4);
        assert_eq!(references(&text, 1), vec![("e".to_string(), 4)]);
    }

    #[test]
    fn lifetimes_survive_and_macro_crate_is_not_followed() {
        let text = strip(
            "fn f<'a>(x: &'a crate::a::A) { $crate::b::B }",
            &mut Vec::new(),
        );
        assert_eq!(references(&text, 1), vec![("a".to_string(), 1)]);
    }

    #[test]
    fn groups_give_each_first_segment() {
        let text = strip(
            "use crate::{a::{X, Y}, b, self, c::Z as W};",
            &mut Vec::new(),
        );
        let names: Vec<String> = references(&text, 1).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, vec!["a", "b", "c"]);
    }

    #[test]
    fn super_counts_only_when_it_reaches_the_root() {
        let text = strip("use super::x::Y; use super::super::z::W;", &mut Vec::new());
        assert_eq!(references(&text, 2), vec![("z".to_string(), 1)]);
        let text = strip(
            "use super::x::Y; fn f() { a::super_b::c(); }",
            &mut Vec::new(),
        );
        assert_eq!(references(&text, 1), vec![("x".to_string(), 1)]);
    }

    #[test]
    fn cfg_test_items_are_cut_and_test_files_recorded() {
        let mut tests = Vec::new();
        let text = strip(
            "#[cfg(test)]\nmod tests;\n#[cfg(test)]\n#[allow(dead_code)]\nmod inline { use crate::b::B; }\nuse crate::a::A;\n#[cfg(test)]\nuse crate::c::C;\n",
            &mut tests,
        );
        assert_eq!(tests, vec!["tests".to_string()]);
        assert_eq!(references(&text, 1), vec![("a".to_string(), 6)]);
    }

    #[test]
    fn test_items_do_not_count_as_lines() {
        let src =
            "/// Doc.\nfn a() {}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() {}\n}\n";
        assert_eq!(non_test_lines(src), 3);
        assert_eq!(non_test_lines("fn a() {}\nfn b() {}\n"), 2);
    }

    #[test]
    fn reexports_map_names_to_modules() {
        let text = strip(
            "pub use breaker::{CircuitBreaker, Permit as P};\npub use crate::error::Error;\npub(crate) use clock::{self, Clock};\npub mod x;",
            &mut Vec::new(),
        );
        let got = reexports(&text);
        assert_eq!(
            got,
            vec![
                ("CircuitBreaker".into(), "breaker".into()),
                ("P".into(), "breaker".into()),
                ("Error".into(), "error".into()),
                ("Clock".into(), "clock".into()),
            ]
        );
    }
}
