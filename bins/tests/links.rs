//! Every relative link of the README, ARCHITECTURE.md, bench/README.md and
//! docs/*.md leads to a file that exists and, where it names one, to a
//! heading of that file (GitHub's anchors: the heading lower-cased, its
//! punctuation dropped, spaces as hyphens).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn documents() -> Vec<PathBuf> {
    let r = repo();
    let mut docs: Vec<PathBuf> = std::fs::read_dir(r.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    for top in ["README.md", "ARCHITECTURE.md", "bench/README.md"] {
        docs.push(r.join(top));
    }
    docs
}

/// The text outside fenced code blocks.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// A heading's anchor as GitHub makes it.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '_' || *c == '-' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(path: &Path) -> HashSet<String> {
    let mut out = HashSet::new();
    let mut seen = std::collections::HashMap::new();
    for line in prose(&std::fs::read_to_string(path).unwrap()).lines() {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let s = slug(&line[hashes..]);
            let n = seen.entry(s.clone()).or_insert(0);
            out.insert(if *n == 0 {
                s.clone()
            } else {
                format!("{s}-{n}")
            });
            *n += 1;
        }
    }
    out
}

/// The targets of a text's Markdown links (`](target)`).
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        if let Some(end) = rest.find(')') {
            let target = &rest[..end];
            if !target.contains(char::is_whitespace) {
                out.push(target.to_string());
            }
        }
    }
    out
}

#[test]
fn every_relative_link_of_the_docs_resolves() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        let text = prose(&std::fs::read_to_string(&doc).unwrap());
        let name = doc.strip_prefix(repo()).unwrap().display().to_string();
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (file, anchor) = link.split_once('#').unwrap_or((&link, ""));
            let target = if file.is_empty() {
                doc.clone()
            } else {
                doc.parent().unwrap().join(file)
            };
            if !target.exists() {
                failures.push(format!("{name}: {link}: no such file"));
            } else if !anchor.is_empty() && !anchors(&target).contains(anchor) {
                failures.push(format!("{name}: {link}: no such heading"));
            }
        }
    }
    assert!(checked >= 100, "only {checked} links found");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
