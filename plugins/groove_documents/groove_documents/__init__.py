"""groove-documents: PDF, Word (.docx) and HTML files as notes (issue #32, ADR-0016)."""
