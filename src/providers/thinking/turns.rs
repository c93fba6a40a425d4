//! The turns of a Messages conversation as the thinking rules see them: where the final
//! assistant turn is, and turns left empty.

use serde_json::Value;

/// Where the last assistant turn is: the last run of consecutive assistant messages (the API
/// joins them into one turn).
pub(super) fn final_assistant_run(msgs: &[Value]) -> Option<std::ops::RangeInclusive<usize>> {
    let assistant = |m: &Value| m.get("role").and_then(Value::as_str) == Some("assistant");
    let end = msgs.iter().rposition(assistant)?;
    let start = msgs[..end]
        .iter()
        .rposition(|m| !assistant(m))
        .map_or(0, |p| p + 1);
    Some(start..=end)
}

/// An assistant turn left empty (it held only thinking) would be refused: dropped.
pub(super) fn drop_empty_turns(msgs: &mut Vec<Value>) {
    msgs.retain(|m| !is_empty_turn(m));
}

/// An assistant message whose content is an empty list.
pub(super) fn is_empty_turn(m: &Value) -> bool {
    m.get("role").and_then(Value::as_str) == Some("assistant")
        && m.get("content")
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty)
}
