//! Flink's `protobuf.message-class-name`: the Java class protoc generates for a message, worked out from
//! the descriptor set's file options as protoc's Java generator names it (`java_package`, else the
//! proto package; `java_multiple_files`; `java_outer_classname`, else the file name in CamelCase, plus
//! `OuterClass` when a top-level type has that name). Nested classes with `$` (`Class.forName`) or `.`.

use format_common::{ConfigError, config_error};
use prost_reflect::{DescriptorPool, FileDescriptor, MessageDescriptor};

/// The message whose generated Java class is `class`.
pub fn find_class(
    pool: &DescriptorPool,
    file: &str,
    class: &str,
) -> Result<MessageDescriptor, ConfigError> {
    let want = class.replace('$', ".");
    pool.all_messages()
        .filter(|m| !m.is_map_entry())
        .find(|m| java_class(m).replace('$', ".") == want)
        .ok_or_else(|| {
            let mut known: Vec<String> = pool
                .all_messages()
                .filter(|m| !m.is_map_entry() && !m.full_name().starts_with("google.protobuf."))
                .map(|m| java_class(&m))
                .collect();
            known.sort();
            known.truncate(20);
            config_error(
                Some("message-class-name"),
                format!(
                    "no message of descriptor set `{file}` generates the Java class `{class}` (its classes: {})",
                    if known.is_empty() { "none".to_owned() } else { known.join(", ") }
                ),
            )
        })
}

/// The Java class name of `message` (`pkg.Outer$Inner`).
pub fn java_class(message: &MessageDescriptor) -> String {
    let file = message.parent_file();
    let proto = file.file_descriptor_proto();
    let options = proto.options.as_ref();
    let package = options
        .and_then(|o| o.java_package.clone())
        .unwrap_or_else(|| file.package_name().to_owned());
    // The message's names inside its package: Outer, Inner.
    let local = match file.package_name() {
        "" => message.full_name().to_owned(),
        p => message.full_name()[p.len() + 1..].to_owned(),
    };
    let nested = local.replace('.', "$");
    let class = if options.and_then(|o| o.java_multiple_files).unwrap_or(false) {
        nested
    } else {
        format!("{}${nested}", outer_class(&file))
    };
    if package.is_empty() {
        class
    } else {
        format!("{package}.{class}")
    }
}

fn outer_class(file: &FileDescriptor) -> String {
    let proto = file.file_descriptor_proto();
    if let Some(name) = proto
        .options
        .as_ref()
        .and_then(|o| o.java_outer_classname.clone())
    {
        return name;
    }
    let base = file.name().rsplit('/').next().unwrap_or_default();
    let base = base
        .strip_suffix(".protodevel")
        .or_else(|| base.strip_suffix(".proto"))
        .unwrap_or(base);
    let mut out = String::new();
    let mut cap = true;
    for c in base.chars() {
        if c.is_ascii_lowercase() {
            out.push(if cap { c.to_ascii_uppercase() } else { c });
            cap = false;
        } else if c.is_ascii_uppercase() {
            out.push(c);
            cap = false;
        } else if c.is_ascii_digit() {
            out.push(c);
            cap = true;
        } else {
            cap = true;
        }
    }
    let clashes = proto.message_type.iter().any(|m| m.name() == out)
        || proto.enum_type.iter().any(|e| e.name() == out)
        || proto.service.iter().any(|s| s.name() == out);
    if clashes {
        out.push_str("OuterClass");
    }
    out
}
