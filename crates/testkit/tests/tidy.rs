//! Tidy checks over the repository's own text, after rust-analyzer's `xtask/src/tidy.rs`:
//! no absolute paths of a developer's machine, no stale "will"/"planned" sentences in
//! ARCHITECTURE.md about crates or modules that already exist, no trailing whitespace or
//! tabs, and no `dbg!`, `todo!` or `unimplemented!` left in non-test code.
//!
//! Every failure names `file:line`. The files are the ones git knows (tracked, plus new
//! files not ignored), or a walk of the tree when git is not there.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// This file names what it looks for, so it is left out of the content checks.
const THIS_FILE: &str = "crates/testkit/tests/tidy.rs";

/// The top-level directories an absolute path must not start with: this machine's
/// workspace, the home directories and the shared temporary directory.
const MACHINE_ROOTS: [&str; 4] = ["work", "root", "home", "tmp"];

/// Absolute paths that are not paths of the machine running the tests, each named with its
/// file. Keep this list short: a test wanting a scratch directory on the host asks for a
/// temporary one through an API instead of writing a path.
const ALLOWED_ABSOLUTE_PATHS: &[(&str, &str)] = &[
    // Paths inside the containers these tests run.
    ("crates/cloud/edgecontroller/tests/sessions.rs", "/tmp/owned"),
    ("crates/edge/edged/tests/cri_runtime.rs", "/tmp/here"),
    ("crates/edge/edged/tests/cri_runtime.rs", "/tmp/nope"),
    ("crates/edgehive/tests/cri.rs", "/tmp/alive"),
    ("crates/edgehive/tests/cri.rs", "/tmp/payload.txt"),
    ("crates/edgehive/tests/edged.rs", "/tmp/scratch"),
    // A value in an EdgeCore configuration that the test parses and never opens.
    ("crates/edgehive/src/edge_config.rs", "/tmp/x.db"),
];

/// Extensions whose files are checked for trailing whitespace and tabs (Go files keep
/// gofmt's tabs). Extension-less scripts that start with `#!` are checked too.
const WHITESPACE_CHECKED: [&str; 4] = ["rs", "md", "toml", "sh"];

/// Names of the macros that mark unfinished or debugging code; a call is the
/// name followed by `!(`.
const UNFINISHED_MACRO_NAMES: [&str; 3] = ["dbg", "todo", "unimplemented"];

#[test]
fn no_absolute_paths_of_this_machine() {
    let repo = Repo::open();
    let mut problems = Vec::new();
    let mut allowed_seen = BTreeSet::new();
    for (path, text) in repo.texts() {
        if path == THIS_FILE {
            continue;
        }
        for (number, line) in numbered(&text) {
            for found in absolute_paths(line) {
                match ALLOWED_ABSOLUTE_PATHS.iter().position(|allowed| *allowed == (path.as_str(), found)) {
                    Some(index) => _ = allowed_seen.insert(index),
                    None => problems.push(format!("{path}:{number}: absolute path {found}")),
                }
            }
        }
    }
    // An exception whose path is gone goes too, so that the list stays short.
    for (index, (path, found)) in ALLOWED_ABSOLUTE_PATHS.iter().enumerate() {
        if !allowed_seen.contains(&index) {
            problems.push(format!("{THIS_FILE}: ALLOWED_ABSOLUTE_PATHS lists {found} in {path}, which is not there"));
        }
    }
    assert_clean("absolute paths in committed files", &problems);
}

#[test]
fn no_trailing_whitespace_or_tabs() {
    let repo = Repo::open();
    let mut problems = Vec::new();
    for (path, text) in repo.texts() {
        if !whitespace_checked(&path, &text) {
            continue;
        }
        for (number, line) in numbered(&text) {
            if line.ends_with(char::is_whitespace) {
                problems.push(format!("{path}:{number}: trailing whitespace"));
            }
            if line.contains('\t') {
                problems.push(format!("{path}:{number}: tab"));
            }
        }
    }
    assert_clean("trailing whitespace or tabs", &problems);
}

#[test]
fn no_unfinished_macros_in_non_test_code() {
    let repo = Repo::open();
    let rust: Vec<(String, String)> = repo.texts().filter(|(path, _)| path.ends_with(".rs")).collect();
    let test_modules = test_module_paths(&rust);
    let mut problems = Vec::new();
    for (path, text) in &rust {
        if path == THIS_FILE || is_test_path(path, &test_modules) {
            continue;
        }
        let test_lines = cfg_test_item_lines(text);
        for (number, line) in numbered(text) {
            if test_lines.contains(&number) || line.trim_start().starts_with("//") {
                continue;
            }
            for name in UNFINISHED_MACRO_NAMES.iter().filter(|name| line.contains(&format!("{name}!("))) {
                problems.push(format!("{path}:{number}: `{name}!(` in non-test code"));
            }
        }
    }
    assert_clean("unfinished or debugging macros in non-test code", &problems);
}

#[test]
fn architecture_md_has_no_stale_future_statements() {
    let repo = Repo::open();
    let text = fs::read_to_string(repo.root.join("ARCHITECTURE.md")).expect("read ARCHITECTURE.md");
    let names = repo.existing_names();
    let problems: Vec<String> = stale_future_statements(&text, &names)
        .into_iter()
        .map(|(line, name)| {
            format!(
                "ARCHITECTURE.md:{line}: says `{name}` will come or is planned, but it exists; say what it does now"
            )
        })
        .collect();
    assert_clean("stale future statements", &problems);
}

// The checks on small inputs: each finds what it should and nothing else.

#[test]
fn absolute_paths_are_found_only_at_a_path_start() {
    let line = r#"open("/work/main/x"); cd /root/.cargo; "$dir/images/root/bin", containers/main/tmp/a, `/tmp/b`"#;
    assert_eq!(absolute_paths(line), ["/work/main/x", "/root/.cargo", "/tmp/b"]);
    assert!(absolute_paths("https://example.invalid/home/page and /var/lib/x").is_empty());
}

#[test]
fn future_statements_are_stale_only_when_they_name_what_exists() {
    let names = Names {
        crates: ["cloudhub", "edgehive-store"].map(String::from).into(),
        modules: ["wire"].map(String::from).into(),
    };
    let text = "Intro.\n\ncloudhub and edgehub\nwill adapt one to the other. The\n`edgehive-store` is here.\n\n\
                ```\nwill cloudhub\n```\nPlanned: `edge/devicetwin`. `wire.rs` is planned too. The wire will go.\n";
    assert_eq!(stale_future_statements(text, &names), [(4, "cloudhub".to_owned()), (10, "wire".to_owned())]);
}

#[test]
fn cfg_test_items_are_skipped() {
    let text = "fn a() {}\n#[cfg(test)]\nmod tests {\n    fn b() { let s = \"}\"; }\n}\nfn c() {}\n";
    assert_eq!(cfg_test_item_lines(text), BTreeSet::from([2, 3, 4, 5]));
}

/// What exists in the workspace, by name.
#[derive(Debug, Default)]
struct Names {
    /// Each crate's folder name (`store`) and package name (`edgehive-store`).
    crates: BTreeSet<String>,
    /// Every module of every crate: file and folder names under `src/` (`wire`, `protobuf`).
    modules: BTreeSet<String>,
}

/// The repository: its root and the files to look at.
#[derive(Debug)]
struct Repo {
    root: PathBuf,
    /// Paths relative to the root, `/`-separated, sorted.
    files: Vec<String>,
}

impl Repo {
    fn open() -> Repo {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let root = root.canonicalize().expect("find the repository root");
        let files = git_files(&root).unwrap_or_else(|| walk_files(&root));
        let files = files.into_iter().filter(|f| root.join(f).is_file()).collect();
        Repo { root, files }
    }

    /// Every file that reads as UTF-8 text, with its contents.
    fn texts(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.files.iter().filter_map(|path| Some((path.clone(), fs::read_to_string(self.root.join(path)).ok()?)))
    }

    /// The names a stale sentence could use for something that exists.
    fn existing_names(&self) -> Names {
        let mut names = Names::default();
        for path in &self.files {
            let Some(rest) = path.strip_prefix("crates/") else { continue };
            if let Some(dir) = rest.strip_suffix("/Cargo.toml") {
                names.crates.extend(dir.rsplit('/').next().map(String::from));
                let manifest = fs::read_to_string(self.root.join(path)).unwrap_or_default();
                names.crates.extend(package_name(&manifest));
            }
            if let Some((_, module)) = rest.split_once("/src/") {
                for part in module.split('/') {
                    let part = part.strip_suffix(".rs").unwrap_or(part);
                    if !matches!(part, "lib" | "main" | "mod") {
                        names.modules.insert(part.to_owned());
                    }
                }
            }
        }
        names
    }
}

/// `git ls-files`: tracked files and new files that are not ignored. `None` when git is not
/// installed or the tree is not a git checkout.
fn git_files(root: &Path) -> Option<Vec<String>> {
    let output = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let listed = String::from_utf8(output.stdout).ok()?;
    let files: BTreeSet<String> = listed.split('\0').filter(|f| !f.is_empty()).map(String::from).collect();
    Some(files.into_iter().collect())
}

/// Every file under `root`, leaving out build output and hidden folders other than `.ci`.
fn walk_files(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                let skipped =
                    name == "target" || name.starts_with("target-") || name == "corpus" || name == "artifacts";
                if !skipped && (!name.starts_with('.') || name == ".ci") {
                    dirs.push(path);
                }
            } else if let Ok(relative) = path.strip_prefix(root) {
                let parts: Vec<_> = relative.components().map(|c| c.as_os_str().to_string_lossy()).collect();
                files.push(parts.join("/"));
            }
        }
    }
    files.sort();
    files
}

/// The lines of `text`, numbered from 1.
fn numbered(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split('\n').enumerate().map(|(i, line)| (i + 1, line)).filter(|(_, line)| !line.is_empty())
}

fn assert_clean(what: &str, problems: &[String]) {
    assert!(problems.is_empty(), "tidy: {what}:\n{}", problems.join("\n"));
}

/// The absolute paths under [`MACHINE_ROOTS`] on `line`: a `/` that starts a path (not one
/// inside `a/tmp/b`, `$dir/root` or a URL) followed by one of the roots and another `/`.
fn absolute_paths(line: &str) -> Vec<&str> {
    let mut found = Vec::new();
    for (start, _) in line.match_indices('/') {
        let before = line.get(..start).and_then(|s| s.chars().next_back());
        let starts_path = before.is_none_or(|c| !(c.is_alphanumeric() || "_.-/$})]~".contains(c)));
        let rest = line.get(start + 1..).unwrap_or_default();
        let under_root = MACHINE_ROOTS.iter().any(|root| rest.strip_prefix(root).is_some_and(|r| r.starts_with('/')));
        if starts_path && under_root {
            let end = rest.find(|c: char| c.is_whitespace() || "\"'`,;:)]}>".contains(c)).unwrap_or(rest.len());
            found.extend(line.get(start..start + 1 + end));
        }
    }
    found
}

fn whitespace_checked(path: &str, text: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => WHITESPACE_CHECKED.contains(&ext),
        _ => text.starts_with("#!"),
    }
}

/// `name = "..."` of the `[package]` table of a manifest.
fn package_name(manifest: &str) -> Option<String> {
    let package = manifest.split("\n[").find(|table| table.trim_start_matches('[').starts_with("package]"))?;
    let line = package.lines().find(|l| l.trim_start().starts_with("name") && l.contains('='))?;
    Some(line.split_once('=')?.1.trim().trim_matches('"').to_owned())
}

/// Sentences of `text` (Markdown, code blocks left out) that speak of the future ("will",
/// "planned") and name something in `names`: the line of the future word and the name.
/// A crate may be named in plain words or in backticks, a module only in backticks (module
/// names are common words); a name in backticks may be a path (`cloud/store/`, `wire.rs`,
/// `protobuf::wire`), of which the last part counts.
fn stale_future_statements(text: &str, names: &Names) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for paragraph in paragraphs(text) {
        let joined: String = paragraph.iter().map(|(_, line)| format!("{line} ")).collect();
        let line_at = |offset: usize| {
            let mut end = 0;
            for (number, line) in &paragraph {
                end += line.len() + 1;
                if offset < end {
                    return *number;
                }
            }
            paragraph.last().map_or(0, |(number, _)| *number)
        };
        let mut sentence_start = 0;
        for sentence in joined.split_inclusive(". ") {
            let offset = sentence_start;
            sentence_start += sentence.len();
            let words = words(sentence);
            let Some((at, _)) = words.iter().find(|(_, w)| {
                let w = w.to_ascii_lowercase();
                w == "will" || w == "planned"
            }) else {
                continue;
            };
            // "edgehive" alone is the project's name; its crate counts only in backticks.
            let plain = words.iter().map(|(_, w)| *w).filter(|w| *w != "edgehive" && names.crates.contains(*w));
            let quoted = sentence.split('`').skip(1).step_by(2).map(|q| {
                let q = q.trim_end_matches('/');
                let last = q.rsplit(['/', ':']).next().unwrap_or(q);
                last.strip_suffix(".rs").unwrap_or(last)
            });
            let quoted = quoted.filter(|q| names.crates.contains(*q) || names.modules.contains(*q));
            if let Some(name) = plain.chain(quoted).next() {
                found.push((line_at(offset + at), name.to_owned()));
            }
        }
    }
    found
}

/// The words of `text` (letters, digits, `-`, `_`) with their byte offsets.
fn words(text: &str) -> Vec<(usize, &str)> {
    let is_word = |c: char| c.is_alphanumeric() || c == '-' || c == '_';
    let mut words = Vec::new();
    let mut start = None;
    for (at, c) in text.char_indices().chain([(text.len(), ' ')]) {
        match (start, is_word(c)) {
            (None, true) => start = Some(at),
            (Some(from), false) => {
                words.extend(text.get(from..at).map(|w| (from, w)));
                start = None;
            }
            _ => {}
        }
    }
    words
}

/// The paragraphs of a Markdown text as numbered lines, fenced code blocks left out.
fn paragraphs(text: &str) -> Vec<Vec<(usize, &str)>> {
    let mut paragraphs = vec![Vec::new()];
    let mut in_code = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            paragraphs.push(Vec::new());
        } else if in_code || line.trim().is_empty() {
            paragraphs.push(Vec::new());
        } else if let Some(last) = paragraphs.last_mut() {
            last.push((i + 1, line));
        }
    }
    paragraphs.retain(|p| !p.is_empty());
    paragraphs
}

/// Files and folders that only tests compile: declared `#[cfg(test)] mod name;` in a file
/// of `rust`. A folder is returned with a trailing `/`.
fn test_module_paths(rust: &[(String, String)]) -> BTreeSet<String> {
    let mut paths = BTreeSet::new();
    for (path, text) in rust {
        let (dir, file) = path.rsplit_once('/').unwrap_or(("", path));
        let base = match file {
            "lib.rs" | "main.rs" | "mod.rs" => dir.to_owned(),
            _ => format!("{dir}/{}", file.trim_end_matches(".rs")),
        };
        let mut cfg_test = false;
        for line in text.lines().map(str::trim) {
            if is_cfg_test(line) {
                cfg_test = true;
            } else if cfg_test && !line.starts_with("#[") && !line.starts_with("//") {
                if let Some(name) = module_declaration(line) {
                    paths.insert(format!("{base}/{name}.rs"));
                    paths.insert(format!("{base}/{name}/"));
                }
                cfg_test = false;
            }
        }
    }
    paths
}

/// Whether the file at `path` is compiled only for tests: under a `tests`, `benches` or
/// `examples` folder, or a module declared under `#[cfg(test)]`.
fn is_test_path(path: &str, test_modules: &BTreeSet<String>) -> bool {
    let in_test_folder = path.split('/').any(|part| matches!(part, "tests" | "benches" | "examples"));
    in_test_folder
        || test_modules.iter().any(|m| if m.ends_with('/') { path.starts_with(m.as_str()) } else { path == m })
}

fn is_cfg_test(line: &str) -> bool {
    line == "#[cfg(test)]" || line.starts_with("#[cfg(all(test,")
}

/// `name` of a line `mod name;` (with any visibility).
fn module_declaration(line: &str) -> Option<&str> {
    let line = line.strip_suffix(';')?;
    let rest = line.split_once("mod ")?.1;
    rest.chars().all(|c| c.is_alphanumeric() || c == '_').then_some(rest)
}

/// The line numbers of items in `text` marked `#[cfg(test)]` that have a body (an inline
/// `mod tests { ... }`, a test-only function): from the attribute to the closing brace.
/// Braces are counted outside string and character literals and comments.
fn cfg_test_item_lines(text: &str) -> BTreeSet<usize> {
    let mut lines = BTreeSet::new();
    // Inside an item marked `#[cfg(test)]`: the brace depth, and whether its body has opened.
    let mut item: Option<(i64, bool)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        let Some((depth, opened)) = item else {
            if is_cfg_test(trimmed) {
                item = Some((0, false));
                lines.insert(i + 1);
            }
            continue;
        };
        lines.insert(i + 1);
        if !opened && depth == 0 && trimmed.ends_with(';') {
            item = None; // `mod name;` or a `use`: no body here
            continue;
        }
        let depth = depth + brace_balance(line);
        let opened = opened || line.contains('{');
        item = if opened && depth <= 0 { None } else { Some((depth, opened)) };
    }
    lines
}

/// Opening minus closing braces on `line`, outside literals and `//` comments.
fn brace_balance(line: &str) -> i64 {
    let mut balance = 0;
    let mut chars = line.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' if in_string => {
                chars.next();
            }
            '"' => in_string = !in_string,
            '/' if !in_string && chars.peek() == Some(&'/') => break,
            '\'' if !in_string => {
                // A character literal such as '{' (a lifetime has no closing quote).
                let mut ahead = chars.clone();
                if let (Some(_), Some('\'')) = (ahead.next(), ahead.next()) {
                    chars.next();
                    chars.next();
                }
            }
            '{' if !in_string => balance += 1,
            '}' if !in_string => balance -= 1,
            _ => {}
        }
    }
    balance
}
