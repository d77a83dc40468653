"""Presentation: terminal tables (`tables`), text and JSON helpers (`text`), charts (`plots`,
`figures`) and the self-contained HTML report (`html`). Import the submodule you need: this
package imports nothing, so the CLI's start-up stays light."""
