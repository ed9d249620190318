//! `docs/options.md` from the declarations.

use super::decl::Rule;
use super::set::OptionSet;

/// Markdown documentation of option sets (the body of `docs/options.md`).
pub fn render_markdown(title: &str, intro: &str, sets: &[&OptionSet]) -> String {
    let mut s = format!("# {title}\n\n{intro}\n");
    for set in sets {
        s.push_str(&format!("\n## {}\n\n{}\n\n", set.owner, set.doc));
        s.push_str("| option | type | required | default | description |\n|---|---|---|---|---|\n");
        for d in &set.options {
            let mut key = format!("`{}`", d.key);
            if !d.aliases.is_empty() {
                key.push_str(&format!(
                    " (also {})",
                    d.aliases
                        .iter()
                        .map(|a| format!("`{a}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            let mut doc = d.doc.replace('|', "\\|");
            if d.secret {
                doc.push_str(" **Secret: redacted in all output.**");
            }
            s.push_str(&format!(
                "| {key} | {} | {} | {} | {doc} |\n",
                d.kind.name(),
                if d.required { "yes" } else { "no" },
                d.default
                    .as_ref()
                    .map(|v| format!("`{v}`"))
                    .unwrap_or_else(|| "—".into()),
            ));
        }
        if !set.rules.is_empty() {
            s.push_str("\nRules:\n\n");
            for r in &set.rules {
                let line = match r {
                    Rule::MutuallyExclusive(a, b) => {
                        format!("`{a}` and `{b}` are mutually exclusive")
                    }
                    Rule::OneOf(keys) => format!(
                        "one of {} is required",
                        keys.iter()
                            .map(|k| format!("`{k}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    Rule::RequiredWhen {
                        option,
                        equals,
                        requires,
                    } => format!("`{requires}` is required when `{option}` = `{equals}`"),
                    Rule::NotGreater { min, max } => {
                        format!("`{min}` must not be greater than `{max}`")
                    }
                };
                s.push_str(&format!("- {line}\n"));
            }
        }
    }
    s
}
