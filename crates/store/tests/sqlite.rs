//! The conformance suite against the SQLite backend, plus SQLite specifics.

use store::sqlite::{SqliteOptions, SqliteStore};
use store::Store;

#[tokio::test]
async fn sqlite_passes_conformance() {
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteStore::open(dir.path(), &SqliteOptions::default()).await.unwrap();
    store::conformance::run_all(&s).await;
}

#[tokio::test]
async fn reopening_keeps_data_and_reapplies_no_migration() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = SqliteStore::open(dir.path(), &SqliteOptions::default()).await.unwrap();
        let u = store::UserRecord {
            id: protocol::UserId(42),
            username: "x".into(),
            global_name: None,
            avatar: None,
            bot: false,
            flags: 0,
            created_at: 0,
        };
        s.create_user(&u, Some("h")).await.unwrap();
    }
    let s = SqliteStore::open(dir.path(), &SqliteOptions::default()).await.unwrap();
    assert_eq!(s.get_user(protocol::UserId(42)).await.unwrap().unwrap().username, "x");
}
