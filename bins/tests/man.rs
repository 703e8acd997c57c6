//! The committed man pages are what the clap definitions generate
//! (`UPDATE_GOLDEN=1 cargo test` regenerates them).

#[test]
fn man_pages_are_up_to_date() {
    let man_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../man");
    let mut stale = Vec::new();
    for cmd in pt2kit_cli::man::tools() {
        let name = cmd.get_name().to_string();
        let page = pt2kit_cli::man::render(cmd).unwrap();
        let path = man_dir.join(format!("{name}.1"));
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::create_dir_all(&man_dir).unwrap();
            std::fs::write(&path, &page).unwrap();
        } else if std::fs::read(&path).ok().as_deref() != Some(page.as_slice()) {
            stale.push(name);
        }
    }
    assert!(
        stale.is_empty(),
        "man pages out of date: {stale:?}; run UPDATE_GOLDEN=1 cargo test -p pt2kit-cli --test man"
    );
}

#[test]
fn pages_document_exit_codes_and_see_also() {
    for cmd in pt2kit_cli::man::tools() {
        let page = String::from_utf8(pt2kit_cli::man::render(cmd).unwrap()).unwrap();
        assert!(page.contains("EXIT STATUS") && page.contains("SEE ALSO"));
        assert!(page.contains("bad input"));
    }
}

/// The exit-status and output sections name only tools that exist (the
/// binaries of bins/src/bin/).
#[test]
fn pages_name_only_real_tools() {
    let bin_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bin");
    let real: Vec<String> = std::fs::read_dir(bin_dir)
        .unwrap()
        .map(|e| {
            let n = e.unwrap().file_name().to_string_lossy().to_string();
            n.trim_end_matches(".rs").to_string()
        })
        .collect();
    for t in pt2kit_cli::man::TOOL_NAMES {
        assert!(real.iter().any(|r| r == t), "{t} is not a tool");
    }
    let mut text = String::new();
    for (_, meaning) in pt2kit::error::EXIT_CODES {
        text.push_str(meaning);
        text.push(' ');
    }
    for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
        let tool_like = word == "pt2ir" || word.starts_with("ir-") || word.starts_with("ir2");
        if tool_like {
            assert!(
                real.iter().any(|r| r == word),
                "EXIT STATUS names {word}, which is not a tool"
            );
        }
    }
}
