//! Text others wrote, shown to a person: the command-line reports (`plan`,
//! `status`) print values a tenant wrote (names, `spec.size`, messages
//! quoting them), and a status condition quotes what a server said.
//! Control characters other than a report's own line ends are shown
//! escaped, so no value can move the cursor, recolour or rewrite a
//! platform engineer's terminal, or forge a line of its own.

/// `text` with every control character but `\n` escaped (`\u{1b}`).
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && c != '\n' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` as one line of a report: every control character escaped, line
/// ends included, so no value a tenant wrote forges a line of its own.
pub fn one_line(text: &str) -> String {
    printable(text).replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_stays_on_its_line() {
        let forged = "development\nPending changes (plan hash 0123456789):";
        assert_eq!(
            one_line(forged),
            "development\\nPending changes (plan hash 0123456789):"
        );
        assert!(!one_line("a\r\nb").contains('\n'));
    }

    #[test]
    fn escape_sequences_are_shown_not_obeyed() {
        let size = "10Gi\u{1b}[2J\u{1b}]0;owned\u{7}\r";
        assert_eq!(printable(size), "10Gi\\u{1b}[2J\\u{1b}]0;owned\\u{7}\\r");
        assert_eq!(printable("a -> b\nc\n"), "a -> b\nc\n");
        assert_eq!(printable("tab\there"), "tab\\there");
    }
}
