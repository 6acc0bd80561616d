//! The code's shape, checked: inside each crate no module imports a module
//! that (through others) imports it, and no function returns
//! `Result<_, String>` (errors are types whose messages name what to
//! change), and no function of the crates, unit test or not, runs over 70 lines
//! (the integration suites' scenarios may). Read from the source as text; unit tests (`mod tests`) are left
//! out, as they may reach anywhere.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

const CRATES: [&str; 7] = [
    "src",
    "runtime/src",
    "providers/api/src",
    "providers/kube/src",
    "providers/aws/src",
    "providers/in-cluster/src",
    "providers/gcp/src",
];

/// Every `.rs` file below `dir`.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// The module path of a file (`a::b` for `a/b.rs` or `a/b/mod.rs`; the
/// crate root is empty).
fn module_of(root: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root).unwrap_or(file).with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts
        .last()
        .is_some_and(|l| ["mod", "lib", "main"].contains(&l.as_str()))
    {
        parts.pop();
    }
    parts
}

/// The source without its unit tests.
fn without_tests(text: &str) -> &str {
    text.find("#[cfg(test)]\nmod tests")
        .map_or(text, |at| &text[..at])
}

/// The paths a `use` tree names: `a::{b, c::{d, self}}` gives `a::b`,
/// `a::c::d` and `a::c::self`.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(tree).trim();
        return vec![path.to_string()];
    };
    let prefix = tree[..open].trim_end_matches("::").trim();
    let close = tree.rfind('}').filter(|c| *c > open).unwrap_or(tree.len());
    let inner = &tree[open + 1..close];
    let (mut parts, mut depth, mut current) = (Vec::new(), 0, String::new());
    for c in inner.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parts.push(current);
    parts
        .iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(|p| expand(p))
        .map(|p| match prefix {
            "" => p,
            prefix => format!("{prefix}::{p}"),
        })
        .collect()
}

/// The `crate::`/`super::`/`self::` paths a source names, in `use`
/// declarations and inline.
fn paths(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    // `use` declarations: from a line that starts one to its `;`.
    let mut offset = 0;
    for line in source.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let declaration = ["use ", "pub use ", "pub(crate) use "]
            .iter()
            .find_map(|p| trimmed.strip_prefix(p));
        if declaration.is_some() {
            let start = offset + (line.len() - trimmed.len());
            let tail = &source[start..];
            let tree = tail.split_once(' ').map_or("", |(_, t)| t);
            let tree = tree.trim_start_matches("use ");
            let end = tree.find(';').unwrap_or(tree.len());
            out.extend(expand(&tree[..end].replace('\n', " ")));
        }
        offset += line.len();
    }
    for start in ["crate::", "super::"] {
        let mut rest = source;
        while let Some(at) = rest.find(start) {
            let tail = &rest[at..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(tail.len());
            out.push(tail[..end].trim_end_matches(':').to_string());
            rest = &tail[end..];
        }
    }
    out
}

/// Which modules each module imports (not counting its own submodules or
/// ancestors, which it is part of).
fn imports(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeMap<Vec<String>, PathBuf> = files(root)
        .into_iter()
        .map(|f| (module_of(root, &f), f))
        .collect();
    let mut edges = BTreeMap::new();
    for (module, file) in &modules {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let mut to = BTreeSet::new();
        for path in paths(without_tests(&text)) {
            let mut segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
            let mut base: Vec<String> = match segments.first() {
                Some(&"crate") => Vec::new(),
                Some(&"super") => module[..module.len().saturating_sub(1)].to_vec(),
                Some(&"self") => module.clone(),
                _ => continue,
            };
            segments.remove(0);
            while segments.first() == Some(&"super") {
                base.pop();
                segments.remove(0);
            }
            // The longest prefix that is a module.
            let target = (1..=segments.len()).rev().find_map(|n| {
                let mut candidate = base.clone();
                candidate.extend(segments[..n].iter().map(|s| s.to_string()));
                modules.contains_key(&candidate).then_some(candidate)
            });
            let Some(target) = target else { continue };
            let related = target.starts_with(module) || module.starts_with(&target);
            if !related {
                to.insert(target.join("::"));
            }
        }
        edges.insert(module.join("::"), to);
    }
    edges
}

/// A cycle through `from`, if there is one.
fn cycle_through(edges: &BTreeMap<String, BTreeSet<String>>, from: &str) -> Option<Vec<String>> {
    let mut stack = vec![(from.to_string(), vec![from.to_string()])];
    let mut seen = BTreeSet::new();
    while let Some((at, path)) = stack.pop() {
        for next in edges.get(&at).into_iter().flatten() {
            if next == from {
                return Some([path.clone(), vec![from.to_string()]].concat());
            }
            if seen.insert(next.clone()) {
                stack.push((next.clone(), [path.clone(), vec![next.clone()]].concat()));
            }
        }
    }
    None
}

/// The same imports between a crate's top-level modules, each with all
/// below it: a service and its submodules are one (`clients` naming
/// `rds::instance` while `rds` names `clients` is a circle too).
fn between_top_modules(
    edges: &BTreeMap<String, BTreeSet<String>>,
) -> BTreeMap<String, BTreeSet<String>> {
    let top = |m: &str| m.split("::").next().unwrap_or_default().to_string();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to) in edges {
        let from = top(from);
        let to: Vec<String> = to.iter().map(|t| top(t)).filter(|t| *t != from).collect();
        out.entry(from).or_default().extend(to);
    }
    out
}

#[test]
fn no_module_imports_one_that_imports_it() {
    for krate in CRATES {
        let edges = imports(Path::new(krate));
        assert!(edges.len() >= 2, "{krate}: no modules read");
        for edges in [between_top_modules(&edges), edges] {
            for module in edges.keys() {
                if let Some(cycle) = cycle_through(&edges, module) {
                    panic!("{krate}: an import circle: {}", cycle.join(" -> "));
                }
            }
        }
    }
}

#[test]
fn the_circle_check_sees_circles() {
    let edges = BTreeMap::from([
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["a".to_string()])),
        ("c".to_string(), BTreeSet::from(["a".to_string()])),
    ]);
    assert_eq!(
        cycle_through(&edges, "a"),
        Some(vec!["a".into(), "b".into(), "a".into()])
    );
    assert_eq!(cycle_through(&edges, "c"), None);
    let nested = BTreeMap::from([
        ("a".to_string(), BTreeSet::from(["b::c".to_string()])),
        ("b".to_string(), BTreeSet::from(["a".to_string()])),
        ("b::c".to_string(), BTreeSet::new()),
    ]);
    assert_eq!(cycle_through(&nested, "a"), None, "file by file");
    let tops = between_top_modules(&nested);
    assert_eq!(
        cycle_through(&tops, "a"),
        Some(vec!["a".into(), "b".into(), "a".into()])
    );
    assert_eq!(
        expand("crate::{a, b::{self, C}, d as e}"),
        ["crate::a", "crate::b::self", "crate::b::C", "crate::d"]
    );
}

/// The error types of every `Result<T, E>` written on `line`.
fn result_errors(line: &str) -> Vec<String> {
    let compact: String = line.split_whitespace().collect();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = compact[from..].find("Result<") {
        let args = &compact[from + at + "Result<".len()..];
        let (mut depth, mut last_comma, mut end) = (0, None, args.len());
        for (i, c) in args.char_indices() {
            match c {
                '<' | '(' => depth += 1,
                '>' | ')' if depth == 0 => {
                    end = i;
                    break;
                }
                '>' | ')' => depth -= 1,
                ',' if depth == 0 => last_comma = Some(i),
                _ => {}
            }
        }
        if let Some(comma) = last_comma {
            out.push(args[comma + 1..end].to_string());
        }
        from += at + "Result<".len();
    }
    out
}

#[test]
fn no_function_returns_a_string_as_its_error() {
    assert_eq!(
        result_errors("fn f() -> Result<BTreeMap<String, String>, ProviderError> {"),
        ["ProviderError"]
    );
    assert_eq!(
        result_errors("-> Result<Result<u8, String>, E>"),
        ["E", "String"]
    );
    for krate in CRATES {
        for file in files(Path::new(krate)) {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            for (n, line) in without_tests(&text).lines().enumerate() {
                let string_error = result_errors(line).iter().any(|e| e == "String");
                assert!(
                    !string_error,
                    "{}:{}: a String error; give it a type whose message says what to change: {line}",
                    file.display(),
                    n + 1
                );
            }
        }
    }
}

/// The async tests in `text` (each `#[tokio::test]` function, to its
/// closing brace at the start of a line) that call none of `bounding`.
fn unbounded_tests(text: &str, bounding: &[String]) -> Vec<String> {
    text.split("#[tokio::test")
        .skip(1)
        .filter_map(|test| {
            let test = &test[..test.find("\n}\n").unwrap_or(test.len())];
            let name = test.split("async fn ").nth(1)?.split('(').next()?;
            let bounded = bounding.iter().any(|b| test.contains(&format!("{b}(")));
            (!bounded).then(|| name.to_string())
        })
        .collect()
}

/// Every async integration and disruptive test body runs under the test
/// limit (tests/support's `limited`, through `with_namespace`,
/// `with_operator` or `bounded`), so a hang fails naming its test instead
/// of holding CI to its wall (the promise `.ci/run` makes).
#[test]
fn every_async_test_runs_under_the_limit() {
    let support = std::fs::read_to_string("tests/support/mod.rs").unwrap_or_default();
    let functions: Vec<(String, &str)> = support
        .split("\npub async fn ")
        .skip(1)
        .filter_map(|f| {
            let name = f.split(['<', '(']).next()?.to_string();
            Some((name, &f[..f.find("\n}\n").unwrap_or(f.len())]))
        })
        .collect();
    // Those that call `limited`, or one that does.
    let mut bounding = vec!["limited".to_string()];
    loop {
        let more: Vec<String> = functions
            .iter()
            .filter(|(name, body)| {
                !bounding.contains(name) && bounding.iter().any(|b| body.contains(&format!("{b}(")))
            })
            .map(|(name, _)| name.clone())
            .collect();
        if more.is_empty() {
            break;
        }
        bounding.extend(more);
    }
    for wrapper in ["with_namespace", "with_operator", "bounded"] {
        assert!(
            bounding.iter().any(|b| b == wrapper),
            "{wrapper} not found among {bounding:?}"
        );
    }
    let sample = "#[tokio::test]\nasync fn hangs() {\n    forever().await;\n}\n#[tokio::test]\nasync fn ok() {\n    bounded(\"ok\", async {}).await;\n}\n";
    assert_eq!(unbounded_tests(sample, &bounding), ["hangs"]);
    let mut found = 0;
    for dir in ["tests/integration", "tests/disruptive"] {
        for file in files(Path::new(dir)) {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            found += text.matches("#[tokio::test").count();
            let unbounded = unbounded_tests(&text, &bounding);
            assert!(
                unbounded.is_empty(),
                "{}: {unbounded:?} run without the test limit; wrap the body in support::bounded(name, async move {{ ... }})",
                file.display()
            );
        }
    }
    assert!(
        found > 100,
        "only {found} async tests found: is this run from the repository root?"
    );
}

/// The operator's kinds and providers, as the runtime must not name them.
const DOMAIN_WORDS: [&str; 9] = [
    "Postgres",
    "Redis",
    "BlobStorage",
    "SMTPCredentialSet",
    "Snapshot",
    "cro_provider_aws",
    "cro_provider_in_cluster",
    "integreatly.org/v1alpha1",
    "openshift",
];

/// The words of `DOMAIN_WORDS` that `code` names.
fn domain_words(code: &str) -> Vec<&'static str> {
    DOMAIN_WORDS
        .into_iter()
        .filter(|w| code.to_lowercase().contains(&w.to_lowercase()))
        .collect()
}

/// The crates the runtime may depend on of this workspace: the provider
/// API, for the fence its writes go behind (AWS calls go behind it too).
const RUNTIME_MAY_USE: [&str; 1] = ["cro-provider-api"];

#[test]
fn the_runtime_names_no_kind_or_provider_and_depends_on_no_operator_crate() {
    assert_eq!(domain_words("struct X { pg: Postgres }"), ["Postgres"]);
    let manifest = std::fs::read_to_string("runtime/Cargo.toml").unwrap_or_default();
    let ours: Vec<&str> = (manifest.lines())
        .filter_map(|l| l.split_whitespace().next())
        .map(|name| name.split('.').next().unwrap_or(name))
        .filter(|name| name.starts_with("cro-") || *name == "cloud-resource-operator")
        .collect();
    assert!(!manifest.is_empty(), "runtime/Cargo.toml not read");
    for name in &ours {
        assert!(
            RUNTIME_MAY_USE.contains(name),
            "runtime/Cargo.toml depends on {name}: the runtime depends on no crate of the operator's kinds or providers"
        );
    }
    let sources = files(Path::new("runtime/src"));
    assert!(sources.len() >= 4, "no runtime/src modules: {sources:?}");
    for file in sources {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let named = domain_words(without_tests(&text));
        assert!(
            named.is_empty(),
            "{} names {named:?}: the runtime names no kind or provider",
            file.display()
        );
    }
}

#[test]
fn the_operator_crate_has_at_most_ten_top_level_modules() {
    let lib = std::fs::read_to_string("src/lib.rs").unwrap_or_default();
    let modules: Vec<&str> = lib
        .lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix("pub mod ")
                .or(l.trim().strip_prefix("mod "))
        })
        .collect();
    assert!(
        modules.len() <= 10,
        "src/lib.rs declares {} modules: {modules:?}",
        modules.len()
    );
    assert!(modules.len() >= 5, "src/lib.rs read wrongly: {modules:?}");
}

/// The longest a function may be, from its `fn` line to its closing brace.
const LONGEST: usize = 70;

/// The functions in `text` longer than [`LONGEST`] lines, with their
/// lengths. A function is read from its `fn` line to the first line that
/// is its indentation and `}` (rustfmt's layout); declarations without a
/// body are skipped.
fn long_functions(text: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (at, line) in lines.iter().enumerate() {
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        let signature = ["pub ", "pub(crate) ", "pub(super) ", "async ", "const "]
            .iter()
            .fold(body, |b, p| b.strip_prefix(p).unwrap_or(b));
        let Some(name) = signature.strip_prefix("fn ") else {
            continue;
        };
        let name: String = name
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let Some(opened) = (at..lines.len()).find(|i| {
            let l = lines[*i].trim_end();
            l.ends_with('{') || l.ends_with(';')
        }) else {
            continue;
        };
        if lines[opened].trim_end().ends_with(';') {
            continue;
        }
        let closing = format!("{indent}}}");
        if let Some(end) = (opened..lines.len()).find(|i| lines[*i] == closing) {
            let length = end - at + 1;
            if length > LONGEST {
                out.push((name, length));
            }
        }
    }
    out
}

#[test]
fn no_function_runs_over_seventy_lines() {
    let mut long = Vec::new();
    for dir in ["src", "runtime/src", "providers"] {
        for file in files(Path::new(dir)) {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            for (name, length) in long_functions(&text) {
                long.push(format!("{}: {name} ({length} lines)", file.display()));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {LONGEST} lines: {long:#?}; split them into steps with names"
    );
}

#[test]
fn the_length_check_sees_long_functions_and_skips_declarations() {
    let body = "    x();\n".repeat(LONGEST);
    let sample = format!(
        "trait T {{\n    fn declared(&self);\n}}\npub async fn long(\n    a: u8,\n) {{\n{body}}}\nfn short() {{\n}}\n"
    );
    assert_eq!(
        long_functions(&sample),
        vec![("long".to_string(), LONGEST + 4)]
    );
}
