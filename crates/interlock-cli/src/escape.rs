//! Text from the storage made safe for a terminal. Below `render` and
//! `target`, which both print names.

use std::borrow::Cow;

/// A name safe to print on a terminal: as it is when harmless, otherwise
/// quoted and escaped (`"a\u{1b}[2J"`).
pub(crate) fn name(name: &str) -> Cow<'_, str> {
    let harmless = |c: char| {
        !c.is_control() && (matches!(c, '"' | '\'' | '\\') || c.escape_debug().count() == 1)
    };
    if name.is_empty()
        || name.trim() != name
        || name.starts_with('"')
        || !name.chars().all(harmless)
    {
        Cow::Owned(format!("{name:?}"))
    } else {
        Cow::Borrowed(name)
    }
}
