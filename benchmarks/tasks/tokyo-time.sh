tools time convert-time source_timezone=America/New_York time=09:30 target_timezone=Asia/Tokyo | jq -r '.target.datetime[11:16]'
