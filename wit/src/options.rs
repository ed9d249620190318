//! Plugin options as the host passes them: (name, value) pairs already checked against the manifest.

/// The options passed to a factory.
pub type Options = Vec<(String, String)>;

/// The value of option `name`, if it was given (the host fills in manifest defaults).
pub fn option<'a>(options: &'a [(String, String)], name: &str) -> Option<&'a str> {
    options
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}
