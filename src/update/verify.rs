//! An update's signature: minisign (the format Tauri's updater and `minisign -S` write),
//! checked with `minisign-verify` (a small, dependency-free verifier by minisign's author,
//! rather than hand-written Ed25519 plumbing). The trusted comment is part of what is signed, and
//! must name the app, the version and the platform offered.

/// The trusted comment a release signs each build with.
pub fn trusted_comment(app: &str, version: &str, platform: &str) -> String {
    format!("{app} {version} {platform}")
}

/// Verifies `data` against `signature` (the `.minisig` file's text) with `public_key` (the
/// key's base64 line, or the whole `.pub` file), and that the signed trusted comment is
/// `expected_comment`.
pub fn verify(
    public_key: &str,
    data: &[u8],
    signature: &str,
    expected_comment: &str,
) -> Result<(), String> {
    let key_line = public_key
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !l.starts_with("untrusted comment:"))
        .ok_or("the signing key is empty")?;
    let pk = minisign_verify::PublicKey::from_base64(key_line)
        .map_err(|e| format!("the signing key is not a minisign key ({e})"))?;
    let sig = minisign_verify::Signature::decode(signature.trim())
        .map_err(|e| format!("the signature is malformed ({e})"))?;
    pk.verify(data, &sig, false).map_err(|_| {
        "the signature does not match (the file was changed, or signed with another key)"
            .to_string()
    })?;
    let comment = sig.trusted_comment();
    if comment != expected_comment {
        return Err(format!(
            "it was signed as {comment:?}, not as {expected_comment:?}"
        ));
    }
    Ok(())
}
