// Package tggenkit runs Firebase Genkit for Go's tool calls through
// toolguard.
package tggenkit
