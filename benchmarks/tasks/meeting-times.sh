# One call per zone, all at once; each writes its own file, printed in order after `wait`.
zones="Asia/Tokyo Europe/Paris Africa/Nairobi America/Lima Europe/Oslo Australia/Sydney"
i=0
for zone in $zones; do
  i=$((i + 1))
  tools time convert-time source_timezone=UTC time=15:00 target_timezone=$zone > out.$i &
done
wait
for n in $(seq 1 $i); do jq -r '"\(.target.timezone) \(.target.datetime[11:16])"' out.$n; done
