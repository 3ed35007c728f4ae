"""groove-bilingual: a candidate leg that translates a query's words with JMdict when the
query is written in another script than the notes (English over Japanese, or the other
way). JMdict is the Electronic Dictionary Research and Development Group's dictionary,
used under CC BY-SA 4.0 (https://www.edrdg.org/edrdg/licence.html)."""
