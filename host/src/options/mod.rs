//! Options declared once.
//!
//! Every option of the host — connector `WITH (...)` options, the Pulsar connector's client settings
//! (also accepted as `properties.<spelling>`), the job's `SET` keys — and every option a plugin manifest
//! declares is one [`OptionDecl`]: key and aliases, [`OptionKind`] with the limits validation enforces,
//! default, documentation, secret flag. An [`OptionSet`] groups the declarations of one owner with its
//! [`Rule`]s; [`OptionSet::resolve`] checks written options against them once, yielding
//! [`ResolvedOptions`] whose values are typed ([`Value`], defaults applied). The same declarations drive
//! the `validate` printout (secrets redacted through [`ResolvedOptions::display_pairs`]) and the generated
//! `docs/options.md` ([`render_markdown`]). Errors are [`OptionError`]s; suggestions come from
//! [`suggest`], the one "did you mean" rule.
//!
//! Keys come in three shapes: exact keys (`print-identifier`), prefix families (`properties.*`: any key under the
//! prefix, passed through to a client) and per-field keys (`fields.#.kind`: `#` is a column of the table).

mod decl;
pub mod duration;
mod error;
mod markdown;
mod resolved;
mod set;
mod suggest;
mod value;

pub use decl::{Choices, OptionDecl, OptionKind, PassThrough, Rule, Text, normalize_key};
pub use error::{FoundBy, OptionError};
pub use markdown::render_markdown;
pub use resolved::{REDACTED, ResolvedOptions, is_secret_key};
pub use set::OptionSet;
pub use suggest::suggest;
pub use value::{
    Value, ValueError, check_value, match_enum, normalize_value, parse_bool, parse_value,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::Pos;

    fn set() -> OptionSet {
        OptionSet::new(
            "connector 'demo'",
            "demo",
            vec![
                OptionDecl::string("service-url", "url").required(),
                OptionDecl::enumeration("mode", &["earliest", "latest"], "m")
                    .default("latest")
                    .aliases(&["scan.startup.mode"]),
                OptionDecl::string("topic", "t"),
                OptionDecl::string("topic-pattern", "p"),
                OptionDecl::int("rows", 0, i64::MAX, "r"),
                OptionDecl::string("properties.*", "pass-through"),
                OptionDecl::enumeration("fields.#.kind", &["random", "sequence"], "k"),
                OptionDecl::string("auth", "a").secret(),
            ],
            vec![Rule::MutuallyExclusive("topic", "topic-pattern")],
        )
    }

    fn raw(pairs: &[(&str, &str)]) -> Vec<(String, String, Pos)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string(), Pos::default()))
            .collect()
    }

    #[test]
    fn resolves_aliases_defaults_families_and_redacts() {
        let r = set()
            .validate(
                "t",
                &raw(&[
                    ("service-url", "pulsar://x"),
                    ("scan.startup.mode", "earliest"),
                    ("properties.auth-params", "token:abc"),
                    ("fields.id.kind", "sequence"),
                    ("auth", "s"),
                ]),
                &["id".into()],
            )
            .unwrap();
        assert_eq!(r.get("mode"), Some("earliest"));
        assert!(r.is_written("mode"), "set through an alias");
        assert_eq!(r.field("fields.#.kind", "id"), Some("sequence"));
        assert_eq!(
            r.prefixed("properties.")
                .get("auth-params")
                .map(String::as_str),
            Some("token:abc")
        );
        let shown = r.display_pairs();
        assert!(
            shown.iter().all(|(_, v)| v != "token:abc" && v != "s"),
            "{shown:?}"
        );
        let r = set()
            .validate("t", &raw(&[("service-url", "x")]), &[])
            .unwrap();
        assert_eq!(r.get("mode"), Some("latest"));
        assert!(!r.is_written("mode"), "a default is not written");
    }

    #[test]
    fn error_kinds() {
        let s = set();
        let e = s
            .validate("t", &raw(&[("service-url", "x"), ("servce-url", "y")]), &[])
            .unwrap_err()
            .remove(0);
        assert!(e.message.contains("did you mean 'service-url'"), "{e}");
        let e = s
            .validate("t", &raw(&[("service-url", "x"), ("mode", "earlist")]), &[])
            .unwrap_err()
            .remove(0);
        assert!(
            e.message
                .contains("did you mean 'earliest'? allowed values: earliest, latest"),
            "{e}"
        );
        let e = s.validate("t", &raw(&[]), &[]).unwrap_err().remove(0);
        assert_eq!(e.option, "service-url");
        let e = s
            .validate(
                "t",
                &raw(&[("service-url", "x"), ("topic", "a"), ("topic-pattern", "b")]),
                &[],
            )
            .unwrap_err()
            .remove(0);
        assert!(e.message.contains("mutually exclusive"), "{e}");
        let e = s
            .validate("t", &raw(&[("service-url", "x"), ("rows", "ten")]), &[])
            .unwrap_err()
            .remove(0);
        assert!(e.message.contains("not a valid integer"), "{e}");
        let e = s
            .validate(
                "t",
                &raw(&[("service-url", "x"), ("fields.idd.kind", "random")]),
                &["id".into()],
            )
            .unwrap_err()
            .remove(0);
        assert!(e.message.contains("did you mean 'fields.id.kind'"), "{e}");
        let e = s
            .validate(
                "t",
                &raw(&[
                    ("service-url", "x"),
                    ("mode", "latest"),
                    ("scan.startup.mode", "latest"),
                ]),
                &[],
            )
            .unwrap_err()
            .remove(0);
        assert!(e.message.contains("set twice"), "{e}");
    }

    #[test]
    fn every_error_of_a_table_is_reported() {
        let e = set()
            .validate(
                "t",
                &raw(&[("scan.startup.mod", "earliest"), ("rows", "ten")]),
                &[],
            )
            .unwrap_err();
        let options: Vec<&str> = e.iter().map(|e| e.option.as_str()).collect();
        assert_eq!(
            options,
            ["scan.startup.mod", "rows", "service-url"],
            "{e:?}"
        );
    }

    #[test]
    fn booleans_and_enums_are_case_insensitive_and_stored_as_declared() {
        let r = set()
            .validate(
                "t",
                &raw(&[("service-url", "x"), ("mode", "EARLIEST")]),
                &[],
            )
            .unwrap();
        assert_eq!(r.get("mode"), Some("earliest"));
        assert_eq!(
            normalize_value(&OptionKind::Bool, " TRUE ").unwrap(),
            "true"
        );
        assert_eq!(
            normalize_value(&OptionKind::Bool, "False").unwrap(),
            "false"
        );
        assert!(normalize_value(&OptionKind::Bool, "yes").is_err());
        assert_eq!(
            normalize_value(
                &OptionKind::Enum(Choices::Static(&["ALL", "EXCEPT_KEY"])),
                "except_key"
            )
            .unwrap(),
            "EXCEPT_KEY"
        );
    }
}
