// Package locales lists the languages of the pages, apart from the pages themselves, so that
// the discovery document (ui_locales_supported) can name them without linking the templates.
package locales

// Supported lists the languages of the pages, the default first.
var Supported = []string{"en", "fr"}
