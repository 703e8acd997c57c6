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
