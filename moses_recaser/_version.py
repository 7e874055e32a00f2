"""The package version, in a module of its own: the floors below the front door read it without importing the
package root."""

__version__ = "0.1.0"
