ALTER TABLE fake_widgets ADD COLUMN colour text;
