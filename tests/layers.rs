//! The modules of a crate import each other one way only, as
//! docs/ARCHITECTURE.md lists them.
//!
//! Every `### Layers: <crate dir>` section of docs/ARCHITECTURE.md holds a
//! table of `| module | may use |` rows. For each such crate, every `.rs`
//! file under `<crate dir>/src` (but `src/bin`) is read, and each path it
//! names through `crate::` (in `use` items, grouped ones included, and in
//! code) is resolved to the module that defines it. The test fails when a
//! file imports a module its row does not list, when a module has no row
//! (or a row names no module), and when the rows' graph has a cycle.
//!
//! Module names are paths from `src` without `.rs`: `hub` for `hub.rs`,
//! `transport` for `transport/mod.rs`, `transport/tcp` for
//! `transport/tcp.rs`. `lib` (the crate root) needs no row and may use
//! anything; a module that imports through the crate root (`crate::Name`
//! for a re-export) must list `lib`. Comments and string literals are
//! skipped; `super::` and `self::` paths are not checked.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

/// A crate's table: each module's row, the modules it may use.
type Rows = BTreeMap<String, BTreeSet<String>>;

/// The name of the crate root's module.
const ROOT: &str = "lib";

#[test]
fn every_crate_import_is_allowed_by_the_layers_in_architecture_md() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the workspace");
    let doc = fs::read_to_string(workspace.join("docs/ARCHITECTURE.md"))
        .expect("docs/ARCHITECTURE.md is readable");
    let tables = layer_tables(&doc).unwrap_or_else(|error| panic!("docs/ARCHITECTURE.md: {error}"));
    assert!(
        tables.iter().any(|table| table.crate_dir == "framework"),
        "docs/ARCHITECTURE.md has no `### Layers: framework` table"
    );
    let mut failures = Vec::new();
    for table in &tables {
        let sources = read_sources(&workspace.join(&table.crate_dir).join("src"));
        assert!(
            !sources.is_empty(),
            "{}/src has no .rs file",
            table.crate_dir
        );
        failures.extend(check(&table.crate_dir, &table.rows, &sources));
    }
    assert!(
        failures.is_empty(),
        "the module layering of docs/ARCHITECTURE.md is broken:\n  {}\n\
         (Change the import, or the table in docs/ARCHITECTURE.md if the layering should change.)",
        failures.join("\n  ")
    );
}

/// One `### Layers: <crate dir>` section.
#[derive(Debug)]
struct LayerTable {
    crate_dir: String,
    rows: Rows,
}

/// Every layer table of the document.
fn layer_tables(doc: &str) -> Result<Vec<LayerTable>, String> {
    let mut tables = Vec::new();
    let mut lines = doc.lines().enumerate().peekable();
    while let Some((number, line)) = lines.next() {
        let Some(crate_dir) = line.strip_prefix("### Layers:") else {
            continue;
        };
        let crate_dir = crate_dir.trim().to_owned();
        while lines.peek().is_some_and(|(_, line)| line.trim().is_empty()) {
            lines.next();
        }
        let mut rows = Rows::new();
        let mut seen_header = false;
        while let Some((row_number, row)) =
            lines.next_if(|(_, line)| line.trim_start().starts_with('|'))
        {
            let cells: Vec<&str> = row
                .trim()
                .trim_matches('|')
                .split('|')
                .map(str::trim)
                .collect();
            if !seen_header {
                seen_header = true;
                continue;
            }
            if cells
                .iter()
                .all(|cell| cell.chars().all(|c| c == '-' || c == ':'))
            {
                continue;
            }
            let [module, uses] = cells[..] else {
                return Err(format!(
                    "line {}: a layer row has two cells: {row}",
                    row_number + 1
                ));
            };
            let module = backticked(module)
                .into_iter()
                .next()
                .ok_or_else(|| format!("line {}: no `module` in {row}", row_number + 1))?;
            let uses = if uses == "—" || uses == "-" {
                BTreeSet::new()
            } else {
                backticked(uses)
            };
            if rows.insert(module.clone(), uses).is_some() {
                return Err(format!(
                    "line {}: module `{module}` has two rows",
                    row_number + 1
                ));
            }
        }
        if rows.is_empty() {
            return Err(format!(
                "line {}: `### Layers: {crate_dir}` has no table",
                number + 1
            ));
        }
        tables.push(LayerTable { crate_dir, rows });
    }
    Ok(tables)
}

/// The `quoted` names of a table cell.
fn backticked(cell: &str) -> BTreeSet<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// One source file: its module name, its path for messages, its text.
struct Source {
    module: String,
    path: String,
    text: String,
}

/// The crate's source files under `src`, by module name.
fn read_sources(src: &Path) -> Vec<Source> {
    let mut files = Vec::new();
    collect_files(src, &src.join("bin"), &mut files);
    let workspace = src.parent().and_then(Path::parent).unwrap_or(src);
    let mut sources: Vec<Source> = files
        .into_iter()
        .map(|file| {
            let relative = file.strip_prefix(src).expect("under src");
            Source {
                module: module_name(relative),
                path: file
                    .strip_prefix(workspace)
                    .unwrap_or(&file)
                    .display()
                    .to_string(),
                text: fs::read_to_string(&file)
                    .unwrap_or_else(|error| panic!("{}: {error}", file.display())),
            }
        })
        .collect();
    sources.sort_by(|a, b| a.path.cmp(&b.path));
    sources
}

/// The `.rs` files under `dir`, but those under `skip`.
fn collect_files(dir: &Path, skip: &Path, files: &mut Vec<PathBuf>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|error| panic!("{}: {error}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            // (Each file of src/bin is a crate of its own.)
            if path != skip {
                collect_files(&path, skip, files);
            }
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path);
        }
    }
}

/// `hub.rs` -> `hub`, `transport/mod.rs` -> `transport`,
/// `transport/tcp.rs` -> `transport/tcp`, `lib.rs` -> `lib`.
fn module_name(relative: &Path) -> String {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    let file = parts.pop().expect("a file name");
    let stem = file.strip_suffix(".rs").unwrap_or(&file);
    if stem != "mod" || parts.is_empty() {
        parts.push(stem.to_owned());
    }
    let name = parts.join("/");
    if name == "main" {
        ROOT.to_owned()
    } else {
        name
    }
}

/// What is wrong with `sources` against `rows`, one message per fault.
fn check(crate_dir: &str, rows: &Rows, sources: &[Source]) -> Vec<String> {
    let mut failures = Vec::new();
    let modules: BTreeSet<&str> = sources
        .iter()
        .map(|source| source.module.as_str())
        .collect();
    for source in sources {
        if source.module != ROOT && !rows.contains_key(&source.module) {
            failures.push(format!(
                "{}: module `{}` has no row in the `### Layers: {crate_dir}` table",
                source.path, source.module
            ));
        }
    }
    for (module, uses) in rows {
        if !modules.contains(module.as_str()) {
            failures.push(format!(
                "`### Layers: {crate_dir}`: the row of `{module}` names no file of {crate_dir}/src"
            ));
        }
        for used in uses {
            if used != ROOT && !rows.contains_key(used) {
                failures.push(format!(
                    "`### Layers: {crate_dir}`: `{module}` may use `{used}`, which has no row"
                ));
            }
        }
    }
    if let Some(cycle) = find_cycle(rows) {
        failures.push(format!(
            "`### Layers: {crate_dir}`: the rows form a cycle: {}",
            cycle.join(" -> ")
        ));
    }
    for source in sources {
        if source.module == ROOT {
            continue;
        }
        let allowed = rows.get(&source.module);
        for import in crate_paths(&source.text) {
            let used = resolve(&import.segments, &modules);
            if used == source.module || allowed.is_some_and(|allowed| allowed.contains(used)) {
                continue;
            }
            let mut message = format!(
                "{}:{}: `{}` — module `{}` may not use `{used}`",
                source.path,
                import.line,
                import.text(),
                source.module
            );
            match allowed {
                Some(allowed) if allowed.is_empty() => {
                    message.push_str(" (its row allows nothing)")
                }
                Some(allowed) => {
                    let list: Vec<&str> = allowed.iter().map(String::as_str).collect();
                    let _ = write!(message, " (its row allows: {})", list.join(", "));
                }
                None => message.push_str(" (it has no row)"),
            }
            if used == ROOT {
                message.push_str("; name the module that defines it, not the crate root");
            }
            failures.push(message);
        }
    }
    failures
}

/// The module that defines `crate::segments…`: the longest leading run of
/// segments that names a module, or the crate root.
fn resolve<'a>(segments: &[String], modules: &BTreeSet<&'a str>) -> &'a str {
    (1..=segments.len())
        .rev()
        .find_map(|len| modules.get(segments[..len].join("/").as_str()).copied())
        .unwrap_or(ROOT)
}

/// A cycle among the rows, as the modules along it (the first again last).
fn find_cycle(rows: &Rows) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit<'a>(
        module: &'a str,
        rows: &'a Rows,
        marks: &mut BTreeMap<&'a str, Mark>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        match marks.get(module) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let start = path
                    .iter()
                    .position(|on| *on == module)
                    .expect("on the path");
                let mut cycle: Vec<String> = path[start..].iter().map(|m| m.to_string()).collect();
                cycle.push(module.to_owned());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(module, Mark::Open);
        path.push(module);
        for used in rows.get(module).into_iter().flatten() {
            if let Some(cycle) = visit(used, rows, marks, path) {
                return Some(cycle);
            }
        }
        path.pop();
        marks.insert(module, Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    rows.keys()
        .find_map(|module| visit(module, rows, &mut marks, &mut Vec::new()))
}

/// One path through `crate::` that a file names.
#[derive(Debug, PartialEq)]
struct CratePath {
    /// The segments after `crate`.
    segments: Vec<String>,
    line: usize,
}

impl CratePath {
    fn text(&self) -> String {
        format!("crate::{}", self.segments.join("::"))
    }
}

/// A token of Rust source, comments and literals left out.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    PathSep,
    Open,
    Close,
    Comma,
    Semi,
    Star,
    Dollar,
    Other,
}

/// Every `crate::` path of `text`: the leaves of `use` trees (grouped
/// ones expanded), and paths written in code.
fn crate_paths(text: &str) -> Vec<CratePath> {
    let tokens = tokenize(text);
    let mut paths = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let (token, line) = &tokens[i];
        if *token == Token::Ident("use".into()) && (i == 0 || tokens[i - 1].0 != Token::PathSep) {
            let mut leaves = Vec::new();
            i = use_tree(&tokens, i + 1, Vec::new(), &mut leaves);
            for (mut segments, line) in leaves {
                if segments.first().is_some_and(|first| first == "crate") {
                    segments.remove(0);
                    segments.retain(|segment| segment != "self");
                    if !segments.is_empty() {
                        paths.push(CratePath { segments, line });
                    }
                }
            }
            continue;
        }
        let after_dollar = i > 0 && tokens[i - 1].0 == Token::Dollar;
        let after_path = i > 0 && tokens[i - 1].0 == Token::PathSep && !after_dollar;
        if *token == Token::Ident("crate".into()) && !after_path {
            let mut segments = Vec::new();
            let mut j = i + 1;
            while let (Some((Token::PathSep, _)), Some((Token::Ident(name), _))) =
                (tokens.get(j), tokens.get(j + 1))
            {
                segments.push(name.clone());
                j += 2;
            }
            if !segments.is_empty() {
                paths.push(CratePath {
                    segments,
                    line: *line,
                });
            }
            i = j;
            continue;
        }
        i += 1;
    }
    paths
}

/// Reads the use tree at `i` under `prefix` into `leaves`; returns the
/// index after it (after its `;` at the top level).
fn use_tree(
    tokens: &[(Token, usize)],
    mut i: usize,
    mut prefix: Vec<String>,
    leaves: &mut Vec<(Vec<String>, usize)>,
) -> usize {
    let top = prefix.is_empty();
    let mut line = tokens.get(i).map_or(0, |(_, line)| *line);
    loop {
        match tokens.get(i) {
            Some((Token::Dollar, _)) => i += 1,
            Some((Token::PathSep, _)) => i += 1,
            Some((Token::Ident(name), at)) if name != "as" => {
                prefix.push(name.clone());
                line = *at;
                i += 1;
            }
            Some((Token::Open, _)) => {
                i += 1;
                loop {
                    match tokens.get(i) {
                        Some((Token::Close, _)) => {
                            i += 1;
                            break;
                        }
                        Some((Token::Comma, _)) => i += 1,
                        Some(_) => i = use_tree(tokens, i, prefix.clone(), leaves),
                        None => return i,
                    }
                }
                break;
            }
            Some((Token::Star, _)) => {
                i += 1;
                leaves.push((prefix.clone(), line));
                break;
            }
            _ => {
                if !prefix.is_empty() {
                    leaves.push((prefix.clone(), line));
                }
                // `as name`
                if tokens
                    .get(i)
                    .is_some_and(|(token, _)| *token == Token::Ident("as".into()))
                {
                    i += 2;
                }
                break;
            }
        }
    }
    if top {
        while let Some((token, _)) = tokens.get(i) {
            i += 1;
            if *token == Token::Semi {
                break;
            }
        }
    } else {
        // Inside a group: stop at the separator or the end of the group.
        while let Some((token, _)) = tokens.get(i) {
            if matches!(token, Token::Comma | Token::Close) {
                break;
            }
            i += 1;
        }
    }
    i
}

/// The tokens of `text` with their line numbers, without comments, string
/// and character literals, or lifetimes.
fn tokenize(text: &str) -> Vec<(Token, usize)> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\n' => {
                line += 1;
                i += 1;
            }
            c if c.is_whitespace() => i += 1,
            '/' if at(i + 1) == '/' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '/' if at(i + 1) == '*' => {
                let mut depth = 0;
                while i < chars.len() {
                    if chars[i] == '/' && at(i + 1) == '*' {
                        depth += 1;
                        i += 2;
                    } else if chars[i] == '*' && at(i + 1) == '/' {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        line += usize::from(chars[i] == '\n');
                        i += 1;
                    }
                }
            }
            '"' => i = skip_string(&chars, i + 1, &mut line),
            '\'' => {
                if at(i + 1) == '\\' {
                    // An escaped character literal: past the escaped
                    // character, up to the closing quote.
                    i += 3;
                    while i < chars.len() && chars[i] != '\'' {
                        i += 1;
                    }
                    i += 1;
                } else if at(i + 2) == '\'' {
                    i += 3;
                } else {
                    // A lifetime or a label.
                    i += 1;
                    while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                        i += 1;
                    }
                }
            }
            c if c.is_alphanumeric() || c == '_' => {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                match (word.as_str(), at(i)) {
                    ("r" | "br" | "cr", '"' | '#') if raw_string_follows(&chars, i) => {
                        i = skip_raw_string(&chars, i, &mut line);
                    }
                    ("b" | "c", '"') => i = skip_string(&chars, i + 1, &mut line),
                    ("b", '\'') => {
                        i += 1;
                        while i < chars.len() && chars[i] != '\'' {
                            i += if chars[i] == '\\' { 2 } else { 1 };
                        }
                        i += 1;
                    }
                    ("r", '#') => i += 1, // a raw identifier follows
                    _ => tokens.push((Token::Ident(word), line)),
                }
            }
            ':' if at(i + 1) == ':' => {
                tokens.push((Token::PathSep, line));
                i += 2;
            }
            _ => {
                let token = match c {
                    '{' => Token::Open,
                    '}' => Token::Close,
                    ',' => Token::Comma,
                    ';' => Token::Semi,
                    '*' => Token::Star,
                    '$' => Token::Dollar,
                    _ => Token::Other,
                };
                tokens.push((token, line));
                i += 1;
            }
        }
    }
    tokens
}

/// Skips a string's body from `i` (after its opening quote) to after its
/// closing quote.
fn skip_string(chars: &[char], mut i: usize, line: &mut usize) -> usize {
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            c => {
                *line += usize::from(c == '\n');
                i += 1;
            }
        }
    }
    i
}

/// Whether `#`s then a quote start at `i` (after `r`, `br` or `cr`).
fn raw_string_follows(chars: &[char], mut i: usize) -> bool {
    while chars.get(i) == Some(&'#') {
        i += 1;
    }
    chars.get(i) == Some(&'"')
}

/// Skips a raw string whose `#`s start at `i`.
fn skip_raw_string(chars: &[char], mut i: usize, line: &mut usize) -> usize {
    let mut hashes = 0;
    while chars.get(i) == Some(&'#') {
        hashes += 1;
        i += 1;
    }
    i += 1;
    while i < chars.len() {
        if chars[i] == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
            return i + 1 + hashes;
        }
        *line += usize::from(chars[i] == '\n');
        i += 1;
    }
    i
}

#[cfg(test)]
mod checks {
    use super::*;

    fn paths(text: &str) -> Vec<String> {
        crate_paths(text).iter().map(CratePath::text).collect()
    }

    #[test]
    fn use_items_grouped_or_not_and_paths_in_code_are_found() {
        let text = r#"
            use crate::close::CloseNotice;
            use crate::{hub::{self, Hub}, ids::*, outbox as boxed};
            pub(crate) use crate::middleware::{self, Outcome};
            use std::sync::Arc;
            fn f() -> crate::store::Store { crate::sync::lock(&x); let _: Vec<crate::ids::ConnectionId<T>>; }
            macro_rules! m { () => { $crate::reply::Reply } }
            pub(crate) struct S; pub(in crate::hub) fn g() {}
        "#;
        assert_eq!(
            paths(text),
            [
                "crate::close::CloseNotice",
                "crate::hub",
                "crate::hub::Hub",
                "crate::ids",
                "crate::outbox",
                "crate::middleware",
                "crate::middleware::Outcome",
                "crate::store::Store",
                "crate::sync::lock",
                "crate::ids::ConnectionId",
                "crate::reply::Reply",
                "crate::hub",
            ]
        );
    }

    #[test]
    fn comments_strings_and_characters_are_not_code() {
        let text = r##"
            // use crate::a::A;
            /// [`B`](crate::b::B)
            /* use crate::c::C; /* nested crate::d */ crate::e */
            let s = "use crate::f::F;"; let r = r#"crate::g"#; let b = b"crate::h";
            let q = '"'; let l: &'static str = "x"; let e = '\''; let u = 'é';
            use crate::real::Real;
        "##;
        assert_eq!(paths(text), ["crate::real::Real"]);
        let lines: Vec<usize> = crate_paths(text).iter().map(|path| path.line).collect();
        assert_eq!(lines, [7]);
    }

    fn sources(files: &[(&str, &str)]) -> Vec<Source> {
        files
            .iter()
            .map(|(module, text)| Source {
                module: (*module).to_owned(),
                path: format!("src/{module}.rs"),
                text: (*text).to_owned(),
            })
            .collect()
    }

    fn rows(table: &str) -> Rows {
        let doc = format!("### Layers: demo\n\n| module | may use |\n|---|---|\n{table}");
        layer_tables(&doc).expect("a table").remove(0).rows
    }

    #[test]
    fn a_forbidden_import_a_missing_row_and_a_cycle_are_reported() {
        let rows_ok = rows("| `a` | — |\n| `b` | `a` |\n| `c/d` | `a`, `b` |\n");
        let files = sources(&[
            ("lib", "use crate::c::d::D; use crate::b;"),
            ("a", "use crate::a::Same; fn f() {}"),
            ("b", "use crate::a::A;"),
            ("c/d", "use crate::{a::A, b::B};"),
        ]);
        assert_eq!(check("demo", &rows_ok, &files), Vec::<String>::new());

        let files = sources(&[
            ("a", "use crate::{b::B};\nfn f() { crate::Root; }"),
            ("b", ""),
            ("c/d", ""),
            ("e", ""),
        ]);
        let failures = check("demo", &rows_ok, &files);
        assert_eq!(failures.len(), 3, "{failures:#?}");
        assert!(
            failures[0].contains("src/e.rs: module `e` has no row"),
            "{}",
            failures[0]
        );
        assert!(
            failures[1].contains(
                "src/a.rs:1: `crate::b::B` — module `a` may not use `b` (its row allows nothing)"
            ),
            "{}",
            failures[1]
        );
        assert!(
            failures[2].contains("src/a.rs:2: `crate::Root` — module `a` may not use `lib`"),
            "{}",
            failures[2]
        );

        let cyclic = rows("| `a` | `c/d` |\n| `b` | `a` |\n| `c/d` | `b` |\n");
        let failures = check(
            "demo",
            &cyclic,
            &sources(&[("a", ""), ("b", ""), ("c/d", "")]),
        );
        assert_eq!(
            failures,
            ["`### Layers: demo`: the rows form a cycle: a -> c/d -> b -> a"]
        );
    }

    #[test]
    fn module_names_follow_the_files() {
        assert_eq!(module_name(Path::new("hub.rs")), "hub");
        assert_eq!(module_name(Path::new("transport/mod.rs")), "transport");
        assert_eq!(module_name(Path::new("transport/tcp.rs")), "transport/tcp");
        assert_eq!(module_name(Path::new("lib.rs")), "lib");
    }
}
