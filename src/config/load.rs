//! Loading: JSON text -> comments stripped -> catalog references filled -> typed parse with
//! the JSON path of any bad field -> semantic validation. Also the published JSON schema.

use std::path::Path;

use super::error::ConfigError;
use super::file::ConfigFile;
use super::validate;

/// Reads, parses and validates a configuration file.
pub fn load_file(path: &Path) -> Result<ConfigFile, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        file: path.to_path_buf(),
        source,
    })?;
    parse_str(&text, path)
}

/// Parses and validates configuration text; `file` only names the source in errors.
pub fn parse_str(text: &str, file: &Path) -> Result<ConfigFile, ConfigError> {
    let mut value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| ConfigError::Syntax {
            file: file.to_path_buf(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })?;
    // serde would take an array for a struct (fields by position): `[]` is no configuration.
    if !value.is_object() {
        return Err(ConfigError::field(
            file,
            ".".to_string(),
            "a configuration is a JSON object ({\"providers\": [...], ...})".to_string(),
        ));
    }
    strip_comments(&mut value);
    apply_catalog(&mut value, file)?;
    let mut config: ConfigFile = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        ConfigError::field(file, path, e.into_inner().to_string())
    })?;
    config
        .providers
        .iter_mut()
        .for_each(super::provider::ProviderConfig::adopt_kind);
    validate(&config, file)?;
    Ok(config)
}

/// A provider may name a catalog entry (`"catalog": "groq"`): the entry's kind, base URL,
/// models, key variable, daily-reset zone and limit scope fill whatever the provider leaves out
/// (the user's own fields always win).
fn apply_catalog(value: &mut serde_json::Value, file: &Path) -> Result<(), ConfigError> {
    use serde_json::Value;
    let Some(providers) = value.get_mut("providers").and_then(Value::as_array_mut) else {
        return Ok(());
    };
    let mut catalog = None;
    for (i, p) in providers.iter_mut().enumerate() {
        let Some(obj) = p.as_object_mut() else {
            continue;
        };
        let Some(reference) = obj.remove("catalog") else {
            continue;
        };
        let path = format!("providers[{i}].catalog");
        let Some(id) = reference.as_str() else {
            return Err(ConfigError::field(
                file,
                path,
                "must be a catalog id such as \"groq\"",
            ));
        };
        if catalog.is_none() {
            catalog = Some(crate::catalog::load().map_err(|e| {
                ConfigError::field(
                    file,
                    &path,
                    format!("the built-in catalog is unreadable: {e}"),
                )
            })?);
        }
        let Some(entry) = catalog
            .as_ref()
            .and_then(|c| c.providers.iter().find(|e| e.id == id))
        else {
            let known: Vec<String> = catalog
                .iter()
                .flat_map(|c| c.providers.iter().map(|e| e.id.clone()))
                .collect();
            return Err(ConfigError::field(
                file,
                path,
                format!("`{id}` is not in the catalog; known: {}", known.join(", ")),
            ));
        };
        let Some(base_url) = &entry.base_url else {
            return Err(ConfigError::field(
                file,
                path,
                format!("`{id}` is a subscription CLI; CLI providers are not supported yet"),
            ));
        };
        fill_from(obj, entry, base_url);
    }
    Ok(())
}

/// The catalog entry's fields a provider left out.
fn fill_from(
    obj: &mut serde_json::Map<String, serde_json::Value>,
    entry: &crate::catalog::CatalogEntry,
    base_url: &str,
) {
    use serde_json::json;
    obj.entry("kind").or_insert_with(|| json!(entry.kind));
    obj.entry("baseUrl").or_insert_with(|| json!(base_url));
    obj.entry("name").or_insert_with(|| json!(entry.name));
    obj.entry("models").or_insert_with(|| {
        json!(entry
            .models
            .iter()
            .chain(&entry.fallback_models)
            .collect::<Vec<_>>())
    });
    if let Some(env) = &entry.key_env {
        obj.entry("keys").or_insert_with(|| json!([{"env": env}]));
    }
    if let Some(c) = &entry.credentials {
        obj.entry("credentials").or_insert_with(|| json!(c));
    }
    if let Some(zone) = &entry.day_reset {
        obj.entry("dayReset").or_insert_with(|| json!(zone));
    }
    if let Some(ids) = &entry.tool_call_ids {
        if let Some(caps) = obj
            .entry("capabilities")
            .or_insert_with(|| json!({}))
            .as_object_mut()
        {
            caps.entry("toolCallIds").or_insert_with(|| json!(ids));
        }
    }
    if let Some(scope) = entry.free_tier.as_ref().map(|t| t.scope.as_str()) {
        let s = match scope {
            "model" => "key-model",
            "provider" => "provider",
            _ => "key",
        };
        obj.entry("limitScope").or_insert_with(|| json!(s));
    }
}

/// JSON has no comments, so the example configuration documents itself with `"$comment"`
/// members (the JSON-Schema convention); they are removed before the typed parse.
fn strip_comments(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.remove("$comment");
            map.values_mut().for_each(strip_comments);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_comments),
        _ => {}
    }
}

/// The JSON schema of the configuration file, as committed in `config.schema.json`.
pub fn json_schema() -> serde_json::Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(ConfigFile)).unwrap_or_default();
    allow_comments(&mut schema);
    // `"catalog": "groq"` fills kind, baseUrl and models from the built-in catalog.
    if let Some(p) = schema.pointer_mut("/$defs/ProviderConfig") {
        if let Some(props) = p.get_mut("properties").and_then(|v| v.as_object_mut()) {
            props.insert(
                "catalog".into(),
                serde_json::json!({"type": "string", "description": "Id of a built-in catalog entry whose kind, baseUrl, models, keys, dayReset and limitScope fill what this provider leaves out."}),
            );
        }
        p["required"] = serde_json::json!(["id"]);
    }
    schema
}

/// Every object in the file may carry a `"$comment"` string (see [`strip_comments`]).
fn allow_comments(schema: &mut serde_json::Value) {
    match schema {
        serde_json::Value::Object(map) => {
            if let Some(serde_json::Value::Object(props)) = map.get_mut("properties") {
                props.insert(
                    "$comment".into(),
                    serde_json::json!({"type": "string", "description": "Free text, ignored."}),
                );
            }
            map.values_mut().for_each(allow_comments);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(allow_comments),
        _ => {}
    }
}
