// `sqlx::migrate!` embeds the migrations at compile time; a new file in
// either directory must rebuild the crate (sqlx's documented advice).
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
