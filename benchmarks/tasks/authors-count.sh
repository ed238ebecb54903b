tools git git-log repo_path=$REPO max_count=100 | sed -n 's/^Author: //p' | sort | uniq -c | sort -k1,1nr -k2 | sed 's/^ *//'
