tools filesystem read-text-file path=$F/app/settings.ini > settings.ini
awk '/^\[/ { s = $0 } s == "[database]" && /^timeout = / { $0 = "timeout = 90" } { print }' settings.ini > new.ini
tools filesystem write-file path=$F/app/settings.ini content=@new.ini > /dev/null
