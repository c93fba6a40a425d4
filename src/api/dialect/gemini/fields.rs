//! Google's JSON as its parser reads it: a field under its lowerCamelCase name or its proto
//! snake_case one, the fields each request type has (an unknown one refused in Google's
//! words), and values checked for their type with Google's messages.

use serde_json::{Map, Value};

use crate::canonical::{invalid, kind_of, InvalidRequest};

/// The fields of Gemini's request types, camelCase, as the `google-genai` SDK's types name
/// them (what Google accepts; `testkit/contract/gemini-generate-content.json` holds the whole).
pub(super) const REQUEST_FIELDS: &[&str] = &[
    "model",
    "contents",
    "tools",
    "toolConfig",
    "safetySettings",
    "systemInstruction",
    "generationConfig",
    "cachedContent",
    "labels",
    "serviceTier",
    "store",
];
pub(super) const CONTENT_FIELDS: &[&str] = &["parts", "role"];
pub(super) const PART_FIELDS: &[&str] = &[
    "audioMetadata",
    "audioTranscription",
    "codeExecutionResult",
    "documentMetadata",
    "executableCode",
    "fileData",
    "functionCall",
    "functionResponse",
    "inlineData",
    "mediaProcessing",
    "mediaResolution",
    "partMetadata",
    "speechMetadata",
    "spreadsheetMetadata",
    "text",
    "thought",
    "thoughtSignature",
    "toolCall",
    "toolResponse",
    "videoMetadata",
];
pub(super) const GENERATION_CONFIG_FIELDS: &[&str] = &[
    "audioTimestamp",
    "audioTranscriptionConfig",
    "candidateCount",
    "enableAffectiveDialog",
    "enableEnhancedCivicAnswers",
    "frequencyPenalty",
    "logprobs",
    "maxOutputTokens",
    "mediaResolution",
    "modelSelectionConfig",
    "presencePenalty",
    "responseFormat",
    "responseJsonSchema",
    "responseLogprobs",
    "responseMimeType",
    "responseModalities",
    "responseSchema",
    "routingConfig",
    "seed",
    "speechConfig",
    "stopSequences",
    "temperature",
    "thinkingConfig",
    "topK",
    "topP",
    "translationConfig",
];

/// A field of `obj` under its camelCase name or its snake_case one.
pub(super) fn field<'a>(obj: &'a Map<String, Value>, camel: &str) -> Option<&'a Value> {
    obj.get(camel)
        .or_else(|| obj.get(&snake(camel)))
        .filter(|v| !v.is_null())
}

pub(super) fn snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 4);
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

pub(super) fn camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut up = false;
    for c in name.chars() {
        if c == '_' {
            up = true;
        } else if up {
            out.push(c.to_ascii_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// Google's refusal of a field its message type does not have.
pub(super) fn unknown_fields(
    obj: &Map<String, Value>,
    known: &[&str],
    at: &str,
) -> Result<(), InvalidRequest> {
    for k in obj.keys() {
        if !known.contains(&camel(k).as_str()) {
            let path = if at.is_empty() {
                k.clone()
            } else {
                format!("{at}.{k}")
            };
            return Err(invalid(
                path,
                format!(
                    "Invalid JSON payload received. Unknown name \"{k}\"{}: Cannot find field.",
                    if at.is_empty() {
                        String::new()
                    } else {
                        format!(" at '{at}'")
                    }
                ),
            ));
        }
    }
    Ok(())
}

pub(super) fn object<'a>(v: &'a Value, at: &str) -> Result<&'a Map<String, Value>, InvalidRequest> {
    v.as_object().ok_or_else(|| {
        invalid(
            at,
            format!(
                "Invalid value at '{at}': expected an object, got {}.",
                kind_of(v)
            ),
        )
    })
}

pub(super) fn array<'a>(v: &'a Value, at: &str) -> Result<&'a Vec<Value>, InvalidRequest> {
    v.as_array().ok_or_else(|| {
        invalid(
            at,
            format!(
                "Invalid value at '{at}': expected a list, got {}.",
                kind_of(v)
            ),
        )
    })
}

pub(super) fn text_of<'a>(v: &'a Value, at: &str) -> Result<&'a str, InvalidRequest> {
    v.as_str().ok_or_else(|| {
        invalid(
            at,
            format!("Invalid value at '{at}' (TYPE_STRING), {}", kind_of(v)),
        )
    })
}
