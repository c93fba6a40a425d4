//! `baton keys`: which catalog providers have a key in the environment, which subscription CLIs
//! are installed, and for the rest where to sign up and what their free tier gives.

pub use baton::providers::presence::{check, which, KeyStatus};

pub fn render(rows: &[KeyStatus], color: bool) -> String {
    let mut table = vec![vec![
        "PROVIDER".to_string(),
        "STATUS".into(),
        "FREE TIER".into(),
        "WHERE / SIGN UP".into(),
    ]];
    for r in rows {
        let where_ = match (&r.found, r.status.as_str()) {
            (Some(f), _) if r.hint.is_some() => {
                format!("{f} — {}", r.hint.clone().unwrap_or_default())
            }
            (Some(f), _) => f.clone(),
            (None, "missing") => r.signup.clone(),
            _ => String::new(),
        };
        let mut tier = r.free_tier.clone().unwrap_or_else(|| "-".into());
        if tier.chars().count() > 60 {
            tier = tier.chars().take(59).collect::<String>() + "…";
        }
        if !r.flags.is_empty() {
            tier.push_str(&format!(" [{}]", r.flags.join(", ")));
        }
        table.push(vec![r.id.clone(), r.status.clone(), tier, where_]);
    }
    let code = |row: usize| match rows[row].status.as_str() {
        "missing" => "90",
        "cli-logged-out" => "33",
        _ => "32",
    };
    super::table::render(
        &table,
        color.then_some((1, &code as &dyn Fn(usize) -> &'static str)),
    )
}
