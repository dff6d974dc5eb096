//! Message components (action rows, buttons, selects) and modal text
//! inputs, checked against the limits Discord documents. Messages (create
//! and edit), webhooks and interaction responses go through [`check`];
//! modals through [`check_modal`]. A failure names the field's path as
//! Discord's 50035 error body does (`components.0.components.1.custom_id`).

use serde_json::Value;

/// Component types.
pub const ACTION_ROW: u64 = 1;
pub const BUTTON: u64 = 2;
pub const STRING_SELECT: u64 = 3;
pub const TEXT_INPUT: u64 = 4;
/// User, role, mentionable and channel selects.
const AUTO_SELECTS: [u64; 4] = [5, 6, 7, 8];
const LINK: u64 = 5;
const PREMIUM: u64 = 6;

const MAX_ROWS: usize = 5;
const MAX_BUTTONS: usize = 5;
const MAX_OPTIONS: usize = 25;
const MAX_CUSTOM_ID: usize = 100;
const MAX_LABEL: usize = 80;
const MAX_PLACEHOLDER: usize = 150;
const MAX_OPTION_TEXT: usize = 100;
const MAX_TEXT_LABEL: usize = 45;
const MAX_TEXT: usize = 4000;

/// A field that breaks a limit: its path, Discord's error code and message.
#[derive(Debug, PartialEq)]
pub struct Invalid {
    pub path: String,
    pub code: &'static str,
    pub message: String,
}

fn bad(path: String, code: &'static str, message: impl Into<String>) -> Result<(), Invalid> {
    Err(Invalid { path, code, message: message.into() })
}

fn len(v: &Value, k: &str) -> usize {
    v.get(k).and_then(Value::as_str).map_or(0, |s| s.chars().count())
}

fn max_len(v: &Value, k: &str, max: usize, at: &str) -> Result<(), Invalid> {
    if len(v, k) > max {
        return bad(format!("{at}.{k}"), "BASE_TYPE_MAX_LENGTH", format!("Must be {max} or fewer in length."));
    }
    Ok(())
}

/// `custom_id`: required, 1 to 100 characters, unique in the message.
fn custom_id<'a>(v: &'a Value, at: &str, seen: &mut Vec<&'a str>) -> Result<(), Invalid> {
    let Some(id) = v.get("custom_id").and_then(Value::as_str) else {
        return bad(format!("{at}.custom_id"), "BASE_TYPE_REQUIRED", "This field is required");
    };
    if id.is_empty() || id.chars().count() > MAX_CUSTOM_ID {
        return bad(format!("{at}.custom_id"), "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.");
    }
    if seen.contains(&id) {
        return bad(format!("{at}.custom_id"), "COMPONENT_CUSTOM_ID_DUPLICATED", "Component custom id cannot be duplicated");
    }
    seen.push(id);
    Ok(())
}

fn kind(v: &Value) -> Option<u64> {
    v.get("type").and_then(Value::as_u64)
}

/// A message's `components` (at `path`, usually `components`).
pub fn check(components: &Value, path: &str) -> Result<(), Invalid> {
    let Some(rows) = components.as_array() else {
        return bad(path.into(), "LIST_TYPE_CONVERT", "Only iterables may be used in a ListType");
    };
    if rows.len() > MAX_ROWS {
        return bad(path.into(), "BASE_TYPE_MAX_LENGTH", format!("Must be {MAX_ROWS} or fewer in length."));
    }
    let mut seen = Vec::new();
    for (r, row) in rows.iter().enumerate() {
        let at = format!("{path}.{r}");
        if kind(row) != Some(ACTION_ROW) {
            return bad(format!("{at}.type"), "UNION_TYPE_CHOICES", "Value of field \"type\" must be one of (1,).");
        }
        let Some(items) = row.get("components").and_then(Value::as_array) else {
            return bad(format!("{at}.components"), "BASE_TYPE_REQUIRED", "This field is required");
        };
        if items.is_empty() {
            return bad(format!("{at}.components"), "BASE_TYPE_MIN_LENGTH", "Must be 1 or more in length.");
        }
        let selects = items.iter().filter(|c| kind(c).is_some_and(|k| k != BUTTON)).count();
        if selects > 0 && items.len() > 1 {
            return bad(format!("{at}.components"), "COMPONENT_LAYOUT_WIDTH_EXCEEDED", "The specified component exceeds the maximum width");
        }
        if items.len() > MAX_BUTTONS {
            return bad(format!("{at}.components"), "BASE_TYPE_MAX_LENGTH", format!("Must be {MAX_BUTTONS} or fewer in length."));
        }
        for (i, c) in items.iter().enumerate() {
            item(c, &format!("{at}.components.{i}"), &mut seen)?;
        }
    }
    Ok(())
}

fn item<'a>(c: &'a Value, at: &str, seen: &mut Vec<&'a str>) -> Result<(), Invalid> {
    match kind(c) {
        Some(BUTTON) => {
            let style = c.get("style").and_then(Value::as_u64).unwrap_or(0);
            if !(1..=PREMIUM).contains(&style) {
                return bad(format!("{at}.style"), "BASE_TYPE_CHOICES", "Value must be one of {1, 2, 3, 4, 5, 6}.");
            }
            max_len(c, "label", MAX_LABEL, at)?;
            if style == LINK {
                if c.get("url").and_then(Value::as_str).is_none_or(str::is_empty) {
                    return bad(format!("{at}.url"), "BASE_TYPE_REQUIRED", "This field is required");
                }
                if c.get("custom_id").is_some_and(|v| !v.is_null()) {
                    return bad(
                        format!("{at}.custom_id"),
                        "BUTTON_COMPONENT_CUSTOM_ID_NOT_ALLOWED",
                        "A link button cannot have a custom id",
                    );
                }
            } else if style != PREMIUM {
                custom_id(c, at, seen)?;
                if c.get("url").is_some_and(|v| !v.is_null()) {
                    return bad(format!("{at}.url"), "BUTTON_COMPONENT_URL_NOT_ALLOWED", "Only link buttons may have a url");
                }
            }
            Ok(())
        }
        Some(k) if k == STRING_SELECT || AUTO_SELECTS.contains(&k) => {
            custom_id(c, at, seen)?;
            max_len(c, "placeholder", MAX_PLACEHOLDER, at)?;
            let min = c.get("min_values").and_then(Value::as_u64).unwrap_or(1);
            let max = c.get("max_values").and_then(Value::as_u64).unwrap_or(1);
            if min > MAX_OPTIONS as u64 {
                return bad(format!("{at}.min_values"), "NUMBER_TYPE_MAX", "int value should be less than or equal to 25.");
            }
            if !(1..=MAX_OPTIONS as u64).contains(&max) || min > max {
                return bad(format!("{at}.max_values"), "NUMBER_TYPE_MAX", "int value should be between 1 and 25.");
            }
            if k == STRING_SELECT {
                let options = c.get("options").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
                if options.is_empty() || options.len() > MAX_OPTIONS {
                    return bad(format!("{at}.options"), "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 25 in length.");
                }
                if (max as usize) > options.len() {
                    return bad(
                        format!("{at}.max_values"),
                        "SELECT_COMPONENT_MAX_VALUES_EXCEEDED",
                        "max_values exceeds the number of options",
                    );
                }
                for (o, opt) in options.iter().enumerate() {
                    let oat = format!("{at}.options.{o}");
                    for k in ["label", "value"] {
                        if len(opt, k) == 0 {
                            return bad(format!("{oat}.{k}"), "BASE_TYPE_REQUIRED", "This field is required");
                        }
                        max_len(opt, k, MAX_OPTION_TEXT, &oat)?;
                    }
                    max_len(opt, "description", MAX_OPTION_TEXT, &oat)?;
                }
            }
            Ok(())
        }
        Some(TEXT_INPUT) => bad(format!("{at}.type"), "COMPONENT_TYPE_INVALID", "Text inputs belong in modals"),
        _ => bad(format!("{at}.type"), "UNION_TYPE_CHOICES", "Unknown component type."),
    }
}

/// Layout types of modals: a label around one input, and text to read.
pub const LABEL: u64 = 18;
pub const TEXT_DISPLAY: u64 = 10;

/// A modal's `components`: action rows of one text input each (the older
/// form), or labels (type 18) each around one text input or select, and
/// text displays (type 10).
pub fn check_modal(components: &Value, path: &str) -> Result<(), Invalid> {
    let Some(rows) = components.as_array() else {
        return bad(path.into(), "LIST_TYPE_CONVERT", "Only iterables may be used in a ListType");
    };
    if rows.is_empty() || rows.len() > MAX_ROWS {
        return bad(path.into(), "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 5 in length.");
    }
    let mut seen = Vec::new();
    for (r, row) in rows.iter().enumerate() {
        let at = format!("{path}.{r}");
        match kind(row) {
            Some(ACTION_ROW) => {
                let items = row.get("components").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
                if items.len() != 1 || kind(&items[0]) != Some(TEXT_INPUT) {
                    return bad(at, "MODAL_COMPONENT_INVALID", "Each row of a modal holds one text input");
                }
                text_input(&items[0], &format!("{at}.components.0"), &mut seen, true)?;
            }
            Some(LABEL) => {
                if len(row, "label") == 0 {
                    return bad(format!("{at}.label"), "BASE_TYPE_REQUIRED", "This field is required");
                }
                max_len(row, "label", MAX_TEXT_LABEL, &at)?;
                max_len(row, "description", MAX_OPTION_TEXT, &at)?;
                let Some(c) = row.get("component").filter(|c| c.is_object()) else {
                    return bad(format!("{at}.component"), "BASE_TYPE_REQUIRED", "This field is required");
                };
                let cat = format!("{at}.component");
                match kind(c) {
                    Some(TEXT_INPUT) => text_input(c, &cat, &mut seen, false)?,
                    Some(k) if k == STRING_SELECT || AUTO_SELECTS.contains(&k) => item(c, &cat, &mut seen)?,
                    _ => return bad(format!("{cat}.type"), "UNION_TYPE_CHOICES", "A label holds a text input or a select."),
                }
            }
            Some(TEXT_DISPLAY) => {
                if len(row, "content") == 0 {
                    return bad(format!("{at}.content"), "BASE_TYPE_REQUIRED", "This field is required");
                }
                max_len(row, "content", MAX_TEXT, &at)?;
            }
            _ => return bad(format!("{at}.type"), "UNION_TYPE_CHOICES", "Value of field \"type\" must be one of (1, 10, 18)."),
        }
    }
    Ok(())
}

/// A text input: `label` is its own in the older form, its label's in the newer.
fn text_input<'a>(c: &'a Value, at: &str, seen: &mut Vec<&'a str>, needs_label: bool) -> Result<(), Invalid> {
    custom_id(c, at, seen)?;
    if !matches!(c.get("style").and_then(Value::as_u64), Some(1 | 2)) {
        return bad(format!("{at}.style"), "BASE_TYPE_CHOICES", "Value must be one of {1, 2}.");
    }
    if needs_label && len(c, "label") == 0 {
        return bad(format!("{at}.label"), "BASE_TYPE_REQUIRED", "This field is required");
    }
    max_len(c, "label", MAX_TEXT_LABEL, at)?;
    max_len(c, "value", MAX_TEXT, at)?;
    max_len(c, "placeholder", MAX_OPTION_TEXT, at)?;
    for k in ["min_length", "max_length"] {
        if c.get(k).and_then(Value::as_u64).is_some_and(|n| n > MAX_TEXT as u64) {
            return bad(format!("{at}.{k}"), "NUMBER_TYPE_MAX", "int value should be less than or equal to 4000.");
        }
    }
    Ok(())
}

/// Every component of a message's `components`, rows and their children.
fn flatten<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
    for c in v.as_array().into_iter().flatten() {
        out.push(c);
        if let Some(inner) = c.get("components") {
            flatten(inner, out);
        }
    }
}

fn invalid(path: &str, code: &'static str, message: impl Into<String>) -> Invalid {
    Invalid { path: path.into(), code, message: message.into() }
}

/// A person's use of a component (`given`: the interaction's `data`)
/// checked against the `components` of the message it is on: a component
/// of that `custom_id` and type that is not disabled; select `values`
/// among its options and within its counts. The `data` the bot gets; the
/// ids a user, role, mentionable or channel select names go to `mentions`.
pub fn check_use(components: &Value, given: &Value, mentions: &mut crate::route::interactions::Mentions) -> Result<Value, Invalid> {
    use protocol::{ChannelId, RoleId, UserId};
    let custom_id = given
        .get("custom_id")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("data.custom_id", "BASE_TYPE_REQUIRED", "This field is required"))?;
    let ctype = given
        .get("component_type")
        .and_then(Value::as_u64)
        .ok_or_else(|| invalid("data.component_type", "BASE_TYPE_REQUIRED", "This field is required"))?;
    let mut all = Vec::new();
    flatten(components, &mut all);
    let Some(c) = all.into_iter().find(|c| c.get("custom_id").and_then(Value::as_str) == Some(custom_id)) else {
        return Err(invalid("data.custom_id", "INTERACTION_COMPONENT_UNKNOWN", "No component with this custom_id on the message."));
    };
    if c.get("type").and_then(Value::as_u64) != Some(ctype) {
        return Err(invalid("data.component_type", "INTERACTION_COMPONENT_TYPE_MISMATCH", "The component is of another type."));
    }
    if c.get("disabled").and_then(Value::as_bool) == Some(true) {
        return Err(invalid("data.custom_id", "INTERACTION_COMPONENT_DISABLED", "The component is disabled."));
    }
    let mut data = serde_json::json!({"custom_id": custom_id, "component_type": ctype});
    if (3..=8).contains(&ctype) {
        let values: Vec<String> = given
            .get("values")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid("data.values", "BASE_TYPE_REQUIRED", "This field is required"))?
            .iter()
            .map(|v| v.as_str().map(str::to_string).ok_or_else(|| invalid("data.values", "STRING_TYPE_CONVERT", "Must be a string.")))
            .collect::<Result<_, _>>()?;
        let min = c.get("min_values").and_then(Value::as_u64).unwrap_or(1) as usize;
        let max = c.get("max_values").and_then(Value::as_u64).unwrap_or(1) as usize;
        if values.len() < min || values.len() > max {
            return Err(invalid("data.values", "BASE_TYPE_BAD_LENGTH", "The number of values is out of range."));
        }
        if ctype == 3 {
            let options: Vec<&str> = c
                .get("options")
                .and_then(Value::as_array)
                .map(|o| o.iter().filter_map(|x| x.get("value").and_then(Value::as_str)).collect())
                .unwrap_or_default();
            if let Some(v) = values.iter().find(|v| !options.contains(&v.as_str())) {
                return Err(invalid("data.values", "INTERACTION_SELECT_VALUE_UNKNOWN", format!("\"{v}\" is not an option.")));
            }
        } else {
            for v in &values {
                let id: u64 = v.parse().map_err(|_| invalid("data.values", "NUMBER_TYPE_COERCE", "Value is not snowflake."))?;
                match ctype {
                    5 => mentions.users.push(UserId(id)),
                    6 => mentions.roles.push(RoleId(id)),
                    8 => mentions.channels.push(ChannelId(id)),
                    _ => mentions.either.push(id),
                }
            }
        }
        data["values"] = serde_json::json!(values);
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn button(id: &str) -> Value {
        json!({"type": 2, "style": 1, "label": "Go", "custom_id": id})
    }

    #[test]
    fn rows_buttons_and_selects_within_limits_pass() {
        let ok = json!([
            {"type": 1, "components": [button("a"), button("b"), {"type": 2, "style": 5, "label": "Docs", "url": "https://example.com"}]},
            {"type": 1, "components": [{"type": 3, "custom_id": "s", "options": [{"label": "A", "value": "a"}, {"label": "B", "value": "b"}], "max_values": 2}]},
            {"type": 1, "components": [{"type": 5, "custom_id": "u", "min_values": 0, "max_values": 25}]},
        ]);
        assert_eq!(check(&ok, "components"), Ok(()));
    }

    #[test]
    fn each_limit_names_its_field() {
        let path = |v: Value| check(&v, "components").unwrap_err().path;
        let six_rows = json!((0..6).map(|i| json!({"type": 1, "components": [button(&format!("b{i}"))]})).collect::<Vec<_>>());
        assert_eq!(path(six_rows), "components");
        let six_buttons: Vec<Value> = (0..6).map(|i| button(&format!("b{i}"))).collect();
        assert_eq!(path(json!([{"type": 1, "components": six_buttons}])), "components.0.components");
        assert_eq!(path(json!([{"type": 1, "components": [button(&"x".repeat(101))]}])), "components.0.components.0.custom_id");
        assert_eq!(path(json!([{"type": 1, "components": [button("a"), button("a")]}])), "components.0.components.1.custom_id");
        assert_eq!(path(json!([button("a")])), "components.0.type");
        let select = |n: usize| json!({"type": 3, "custom_id": "s", "options": (0..n).map(|i| json!({"label": "L", "value": format!("v{i}")})).collect::<Vec<_>>()});
        assert_eq!(path(json!([{"type": 1, "components": [select(26)]}])), "components.0.components.0.options");
        assert_eq!(path(json!([{"type": 1, "components": [select(2), button("b")]}])), "components.0.components");
        assert_eq!(
            path(json!([{"type": 1, "components": [{"type": 2, "style": 5, "label": "x", "url": "https://e", "custom_id": "c"}]}])),
            "components.0.components.0.custom_id"
        );
        assert_eq!(
            path(json!([{"type": 1, "components": [{"type": 2, "style": 1, "label": "x".repeat(81), "custom_id": "c"}]}])),
            "components.0.components.0.label"
        );
    }

    #[test]
    fn modals_hold_one_text_input_per_row() {
        let input = |id: &str| json!({"type": 1, "components": [{"type": 4, "custom_id": id, "label": "Name", "style": 1}]});
        assert_eq!(check_modal(&json!([input("a"), input("b")]), "data.components"), Ok(()));
        assert_eq!(check_modal(&json!([]), "data.components").unwrap_err().path, "data.components");
        assert_eq!(
            check_modal(&json!([input("a"), input("a")]), "data.components").unwrap_err().path,
            "data.components.1.components.0.custom_id"
        );
        assert_eq!(
            check_modal(&json!([{"type": 1, "components": [button("a")]}]), "data.components").unwrap_err().path,
            "data.components.0"
        );
        // The newer form: labels around inputs, and text to read.
        let label = json!({"type": 18, "label": "Your name", "component": {"type": 4, "custom_id": "n", "style": 1}});
        let text = json!({"type": 10, "content": "Tell us"});
        assert_eq!(check_modal(&json!([text, label]), "data.components"), Ok(()));
        let no_label = json!({"type": 18, "component": {"type": 4, "custom_id": "n", "style": 1}});
        assert_eq!(check_modal(&json!([no_label]), "data.components").unwrap_err().path, "data.components.0.label");
    }
}
