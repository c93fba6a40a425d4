//! The data directory is 0700 and every file in it 0600 — on creation, and when an older
//! version (or a hand-made copy) left them readable by other local users.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(unix)]

use std::os::unix::fs::PermissionsExt;

use crate::common::*;
use serde_json::json;
use testkit::FakeUpstream;

fn mode(p: &std::path::Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn assert_private(dir: &std::path::Path) {
    assert_eq!(mode(dir), 0o700, "{}", dir.display());
    let mut files = 0;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_type().unwrap().is_file() {
            files += 1;
            assert_eq!(mode(&e.path()), 0o600, "{}", e.path().display());
        }
    }
    assert!(files >= 4, "baton.db, its -wal and -shm, and the keys");
}

#[tokio::test]
async fn the_data_directory_and_its_files_are_private() {
    let up = FakeUpstream::start("a").await;
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("data");
    let config = json!({"providers": [provider("a", &up.base_url(), 1)]});
    // A fresh directory.
    let baton = Baton::start(&dir, config.clone()).await;
    assert_eq!(baton.chat("auto", "hi").await.status(), 200);
    let _ = baton.log().await;
    assert_private(&dir);
    baton.stop().await;

    // Found looser: everything readable by all, as an older version left it (with the icon
    // the desktop shell writes there, which is Baton's too).
    std::fs::write(dir.join(baton::store::ICON_FILE), b"png").unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let baton = Baton::start(&dir, config).await;
    assert_eq!(baton.chat("auto", "hi").await.status(), 200);
    let _ = baton.log().await;
    assert_private(&dir);
    baton.stop().await;
}

/// `--data-dir` on a directory of the user's own: Baton's files are private, the user's are
/// left as they were (a script keeps its execute bit).
#[tokio::test]
async fn only_batons_own_files_are_tightened() {
    let up = FakeUpstream::start("a").await;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("deploy.sh");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &up.base_url(), 1)]}),
    )
    .await;
    assert_eq!(baton.chat("auto", "hi").await.status(), 200);
    let _ = baton.log().await;
    baton.stop().await;
    assert_eq!(mode(&script), 0o755, "the user's script is untouched");
    assert_eq!(mode(&dir.path().join("baton.db")), 0o600);
    assert_eq!(mode(&dir.path().join("admin.key")), 0o600);
}
