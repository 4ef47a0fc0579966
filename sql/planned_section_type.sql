-- planned_section_type: the ENUM type `planned_section` of one slice's sections ($sections,
-- by group_id + 1, as planned_rows takes them), so that planned_rows writes each row's
-- section as a code of its type instead of its text (the part holds the text, which every
-- reader sees): a cheaper write. Parameters: $sections (VARCHAR[]).
CREATE OR REPLACE TYPE planned_section AS ENUM (SELECT DISTINCT unnest($sections::VARCHAR[]));
