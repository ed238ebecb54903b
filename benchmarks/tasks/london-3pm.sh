tools time convert-time source_timezone=Europe/London time=15:00 target_timezone=America/Toronto | jq -r '.target.datetime[11:16]'
