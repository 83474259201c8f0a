//! The relative links of README.md and docs/*.md: each names a file that exists and, after a
//! `#`, an anchor of that file (a heading's GitHub anchor, or an explicit `<a id="…">`), so
//! the README's map of docs/ and the documents' cross-references cannot rot when a section
//! moves or is renamed. Pure text: no ZooKeeper involved.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The documents checked: the README and every Markdown file in docs/.
fn documents() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .map(|e| e.expect("a docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    docs.insert(0, root.join("README.md"));
    docs
}

/// The lines outside fenced code blocks (between lines of three backticks), where links and
/// headings are.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|line| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// GitHub's anchor for a heading: lower case, punctuation dropped (but `-` and `_`), spaces
/// as `-`; a repeated heading gets `-1`, `-2`, ….
fn anchors(text: &str) -> HashSet<String> {
    let mut found = HashSet::new();
    for line in prose(text) {
        let heading = line.trim_start_matches('#');
        if heading.len() < line.len() && heading.starts_with(' ') {
            let slug: String = heading
                .trim()
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
                .map(|c| if c == ' ' { '-' } else { c })
                .collect();
            let mut candidate = slug.clone();
            let mut n = 0;
            while !found.insert(candidate.clone()) {
                n += 1;
                candidate = format!("{slug}-{n}");
            }
        }
        for id in line.split("<a id=\"").skip(1) {
            found.insert(id.split('"').next().unwrap_or_default().to_string());
        }
    }
    found
}

/// The targets of the Markdown links `[text](target)` of a line, outside inline code.
fn link_targets(line: &str) -> Vec<String> {
    let outside_code: String = line
        .split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 0)
        .map(|(_, part)| part)
        .collect::<Vec<_>>()
        .join(" ");
    outside_code
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .filter(|t| !t.is_empty() && !t.contains(char::is_whitespace))
        .map(str::to_string)
        .collect()
}

/// Every broken relative link of the documents, as "file: target: why".
fn broken_links(documents: &[PathBuf]) -> (usize, Vec<String>) {
    let mut checked = 0;
    let mut broken = Vec::new();
    for doc in documents {
        let text = std::fs::read_to_string(doc).expect("a readable document");
        for line in prose(&text) {
            for target in link_targets(line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
                let path = if file.is_empty() {
                    doc.clone()
                } else {
                    doc.parent().expect("a directory").join(file)
                };
                let why = if !path.exists() {
                    Some(format!("no file {}", path.display()))
                } else if anchor.is_empty() {
                    None
                } else if path.extension().is_none_or(|x| x != "md") {
                    Some("an anchor into a file that is not Markdown".to_string())
                } else {
                    let anchors = anchors(&std::fs::read_to_string(&path).expect("readable"));
                    (!anchors.contains(anchor)).then(|| format!("no anchor #{anchor}"))
                };
                if let Some(why) = why {
                    broken.push(format!("{}: {target}: {why}", doc.display()));
                }
            }
        }
    }
    (checked, broken)
}

#[test]
fn every_relative_link_of_the_readme_and_docs_resolves() {
    let (checked, broken) = broken_links(&documents());
    assert!(
        checked > 20,
        "only {checked} relative links found: is the parser blind?"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn a_missing_file_and_a_missing_anchor_are_reported() {
    let dir = std::env::temp_dir().join(format!("zkguard-doc-links-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let doc = dir.join("a.md");
    std::fs::write(
        dir.join("b.md"),
        "# B\n\n## One interface: `Lock` and `Guard`\n\n- <a id=\"x\"></a>**X.**\n",
    )
    .expect("write b.md");
    std::fs::write(
        &doc,
        "# A\n\n[ok](b.md#one-interface-lock-and-guard) [ok](b.md#x) [ok](#a)\n\
         [gone](c.md) [no anchor](b.md#nope) `[code](c.md)`\n\n```text\n[fenced](c.md)\n```\n",
    )
    .expect("write a.md");
    let (checked, broken) = broken_links(&[doc]);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(checked, 5, "{broken:?}");
    assert_eq!(broken.len(), 2, "{broken:?}");
    assert!(broken[0].contains("c.md: no file"), "{broken:?}");
    assert!(
        broken[1].contains("b.md#nope: no anchor #nope"),
        "{broken:?}"
    );
}
