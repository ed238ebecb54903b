for q in 1 2 3 4; do tools filesystem read-text-file path=$F/sales/q$q.csv > q$q.csv; done
{ cat q1.csv; for q in 2 3 4; do tail -n +2 q$q.csv; done; } > all.csv
tools filesystem write-file path=$F/sales/all.csv content=@all.csv > /dev/null
